"""When a GRPO step stops sampling extra tasks: the training reward saturated (`GRPOConfig.saturation_reward`).

Sampling fresh tasks until enough groups have rewards that vary pays while the policy still fails often; once it
gets nearly everything right, almost every group is all right, a step spends its whole task budget finding the few
that vary, and the run takes fewer, longer steps (docs/benchmarks-appendix.md, "No wasted steps"). The rule reads only the
run's history, so a resumed run decides as the uninterrupted one would.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Optional

__all__ = ["reward_saturated"]


def reward_saturated(history: Sequence[Mapping[str, Any]], threshold: Optional[float], window: int) -> bool:
    """True when the mean of the last `window` steps' mean training rewards is at least `threshold`.

    Entries without a `reward_mean` (a step interrupted before it was counted) are passed over; fewer than `window`
    steps, a step whose reward is None (none of its rollouts gave one) among the last `window`, or `threshold` None:
    False.
    """
    if threshold is None or window < 1:
        return False
    recent = [entry["reward_mean"] for entry in history if "reward_mean" in entry][-window:]
    if len(recent) < window or any(reward is None for reward in recent):
        return False
    return statistics.fmean(float(reward) for reward in recent) >= threshold
