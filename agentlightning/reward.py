"""Deprecated location of the reward helpers: import them from `agentlightning` or `agentlightning.emitter`."""

from __future__ import annotations

import warnings

from agentlightning.emitter.reward import (  # noqa: F401
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
    reward,
)

warnings.warn(
    "agentlightning.reward is deprecated; import the reward helpers from agentlightning instead",
    DeprecationWarning,
    stacklevel=2,
)
