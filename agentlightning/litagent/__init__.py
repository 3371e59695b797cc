"""Agents as the runner sees them: the `LitAgent` base class and the functional decorators."""

from __future__ import annotations

from .decorator import FunctionalLitAgent, llm_rollout, prompt_rollout, rollout
from .litagent import LitAgent, is_v0_1_rollout_api

__all__ = ["FunctionalLitAgent", "LitAgent", "is_v0_1_rollout_api", "llm_rollout", "prompt_rollout", "rollout"]
