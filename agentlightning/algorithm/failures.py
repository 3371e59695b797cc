"""Which failed rollouts training may score with a failure reward (GRPO's and VERL's `failure_reward`).

A rollout failed *in the agent* when the agent's own code raised (typically on the model's output: an answer that
does not parse, a tool call the agent rejects): the runner caught the exception from the agent call and recorded
the attempt as failed with `error_source="agent"` in its metadata. With a failure reward such a rollout is trained
on like any other, with that reward as its outcome, so the group's baseline also sees the answers that broke the
agent. Every other failure is infrastructure and stays dropped (and counted): a timeout, a runner that died or went
unresponsive, a stopped runner, the store, a hook, a connection to the LLM server (`is_connection_failure`), a
result the store refused, and attempts recorded by runners that do not say where a failure came from.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.runner.results import ERROR_SOURCE
from agentlightning.types import Attempt, Rollout

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["check_failure_reward", "failed_in_agent", "read_failed_in_agent"]

logger = logging.getLogger(__name__)


def check_failure_reward(value: Any, name: str = "failure_reward") -> Optional[float]:
    """`value` as a float, or None (the option is off). ValueError for anything but a finite number or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number or None (failed rollouts are not trained), got {value!r}")
    return float(value)


def failed_in_agent(rollout: Rollout, attempt: Optional[Attempt]) -> bool:
    """Whether `rollout` failed because its agent raised, judged by its latest attempt (see the module docstring)."""
    if rollout.status != "failed" or attempt is None or attempt.status != "failed":
        return False
    return (attempt.metadata or {}).get(ERROR_SOURCE) == "agent"


async def read_failed_in_agent(store: LightningStore, rollout: Rollout) -> bool:
    """`failed_in_agent` for a rollout of `store` (False, logged, when its latest attempt cannot be read)."""
    if rollout.status != "failed":
        return False
    try:
        attempt = await store.get_latest_attempt(rollout.rollout_id)
    except Exception as exc:
        logger.warning("Rollout %s: its latest attempt could not be read (%r); not scored", rollout.rollout_id, exc)
        return False
    return failed_in_agent(rollout, attempt)
