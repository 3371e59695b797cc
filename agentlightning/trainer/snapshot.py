"""The state of a run as its progress display shows it: `ProgressSnapshot`, `RunSummary` and `ProgressTracker`.

`ProgressTracker` turns what the progress monitor (progress.py) reads from the store (status counts, the rollouts
finished since the last read, the workers) into snapshots; it is plain state, no I/O, tested directly. The rewards
come from the attempt metadata that runners write when they finish (`final_reward`), so following them costs no span
queries; training rollouts and evaluation rollouts (mode "val" or "test", e.g. GRPO's held-out evaluations) are
averaged apart, so the reward shown is the training reward. Bookkeeping rollouts an algorithm creates during the run
(APO's checkpoint record) are not counted.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from agentlightning.types import Rollout, RolloutStatus
from agentlightning.utils.bookkeeping import is_bookkeeping_rollout

__all__ = ["FINISHED", "ProgressSnapshot", "ProgressTracker", "RunSummary"]

FINISHED: tuple[RolloutStatus, ...] = ("succeeded", "failed", "cancelled")
_EVALUATION_MODES = ("val", "test")
"""Rollout modes whose rewards are evaluations, kept apart from the training reward."""


@dataclass
class ProgressSnapshot:
    """The state of a run at one moment (counts cover the rollouts finished since the run started)."""

    elapsed: float = 0.0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    running: int = 0
    queued: int = 0
    rollouts_per_second: float = 0.0
    reward_mean: Optional[float] = None
    """Mean final reward of the last `reward_window` finished training rollouts (mode not "val"/"test") with one."""
    val_reward_mean: Optional[float] = None
    """The same over evaluation rollouts (mode "val" or "test"); None before any finished."""
    without_reward: int = 0
    runners_alive: int = 0
    runners_seen: int = 0
    store_unreachable_for: Optional[float] = None
    """Seconds since the store stopped answering the monitor's reads (None while it answers)."""

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.cancelled


@dataclass
class RunSummary:
    """What a finished run did: counts, reward, throughput and the most frequent failure reasons."""

    snapshot: ProgressSnapshot
    failure_reasons: list[tuple[str, int]] = field(default_factory=list)
    missing_llm_calls: Optional[str] = None
    """Set when no rollout of the run produced an LLM call: that, with the cause and the fix (`capture_check`)."""

    def describe(self) -> str:
        s = self.snapshot
        text = (
            f"{s.done} rollouts finished in {s.elapsed:.1f} s: {s.succeeded} succeeded, {s.failed} failed, "
            f"{s.cancelled} cancelled"
        )
        if s.running or s.queued:
            text += f"; {s.running} still running, {s.queued} still queued"
        if s.reward_mean is not None:
            text += f"; mean reward {s.reward_mean:.4g} (last training rollouts)"
        if s.val_reward_mean is not None:
            text += f"; mean validation reward {s.val_reward_mean:.4g} (last evaluation rollouts)"
        if s.without_reward:
            text += f"; {s.without_reward} without a reward"
        if self.failure_reasons:
            reasons = "; ".join(f"{count}x {reason}" for reason, count in self.failure_reasons)
            text += f". Failure reasons: {reasons}"
        if self.missing_llm_calls:
            text += f". Capture: {self.missing_llm_calls}"
        return text

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self.snapshot)
        data["done"] = self.snapshot.done
        data["failure_reasons"] = [{"reason": reason, "count": count} for reason, count in self.failure_reasons]
        data["missing_llm_calls"] = self.missing_llm_calls
        return data


def _final_reward(rollout: Rollout) -> tuple[bool, Optional[float]]:
    """(whether the runner reported on it, its final reward) from the latest attempt's metadata."""
    attempt = getattr(rollout, "attempt", None)
    metadata = getattr(attempt, "metadata", None) or {}
    if "final_reward" not in metadata:
        return False, None
    value = metadata.get("final_reward")
    return True, float(value) if isinstance(value, (int, float)) else None


class ProgressTracker:
    """Turns store readings into snapshots (no I/O: fed by the monitor, tested directly)."""

    def __init__(self, *, reward_window: int = 100, rate_window: float = 10.0) -> None:
        self._baseline: Optional[dict[str, int]] = None
        self._rewards: deque[float] = deque(maxlen=reward_window)
        self._val_rewards: deque[float] = deque(maxlen=reward_window)
        self._seen: set[str] = set()
        self._without_reward = 0
        self._done_history: deque[tuple[float, int]] = deque()
        self._rate_window = rate_window
        self._started = time.monotonic()
        self._bookkeeping: Counter[str] = Counter()  # statuses of bookkeeping rollouts created during the run

    def set_baseline(self, counts: dict[str, int], finished: Sequence[Rollout] = ()) -> None:
        """Counts of finished rollouts already in the store when the run started (not counted as progress), and the
        recently finished ones among them (so that they are not taken for new ones later)."""
        self._baseline = {key: counts.get(key, 0) for key in FINISHED}
        self._seen.update(rollout.rollout_id for rollout in finished)

    def update(
        self, counts: dict[str, int], finished: Sequence[Rollout], workers_alive: int, workers_seen: int
    ) -> ProgressSnapshot:
        now = time.monotonic()
        if self._baseline is None:
            self.set_baseline({})
        assert self._baseline is not None
        # Oldest first, so that the reward window ends with the newest rewards (the store answers newest first).
        for rollout in sorted(finished, key=lambda item: item.end_time or 0.0):
            if rollout.rollout_id in self._seen:
                continue
            self._seen.add(rollout.rollout_id)
            if is_bookkeeping_rollout(rollout):
                self._bookkeeping[rollout.status] += 1
                continue
            reported, reward = _final_reward(rollout)
            if reward is not None:
                (self._val_rewards if rollout.mode in _EVALUATION_MODES else self._rewards).append(reward)
            elif reported and rollout.status == "succeeded":
                self._without_reward += 1
        snapshot = ProgressSnapshot(
            elapsed=now - self._started,
            succeeded=self._progress(counts, "succeeded"),
            failed=self._progress(counts, "failed"),
            cancelled=self._progress(counts, "cancelled"),
            running=counts.get("running", 0),
            queued=counts.get("queued", 0),
            reward_mean=sum(self._rewards) / len(self._rewards) if self._rewards else None,
            val_reward_mean=sum(self._val_rewards) / len(self._val_rewards) if self._val_rewards else None,
            without_reward=self._without_reward,
            runners_alive=workers_alive,
            runners_seen=workers_seen,
        )
        self._done_history.append((now, snapshot.done))
        while len(self._done_history) > 2 and now - self._done_history[0][0] > self._rate_window:
            self._done_history.popleft()
        first_time, first_done = self._done_history[0]
        if now > first_time:
            snapshot.rollouts_per_second = (snapshot.done - first_done) / (now - first_time)
        return snapshot

    def _progress(self, counts: dict[str, int], status: str) -> int:
        assert self._baseline is not None
        return max(0, counts.get(status, 0) - self._baseline[status] - self._bookkeeping[status])
