"""What a GRPO checkpoint records of its run besides the weights (`run_state`), and the run's counters restored from
it when a run resumes (`restore_run_state`): the step, the history, the skip, drift and sampling counts, the task
cursor and the evaluations. Each agent's part (several agents) is `trained`'s, beside this one. And the wall seconds
of a run's phases (`timed`), which its summary records."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Optional, Protocol

from ..config import GRPOConfig
from ..learning.samples import DriftCounts
from ..rollouts.reading import SkipCounts
from ..sampling.schedule import SamplingCounts
from ..sampling.task_stream import TaskStream
from .evaluation import EvaluationReport

if TYPE_CHECKING:
    from ..learning.policy import Policy

__all__ = ["RecordedRun", "restore_run_state", "run_state", "timed"]


class RecordedRun(Protocol):
    """The parts of a run (a `GRPO`) that its checkpoints record."""

    step: int
    start_step: int
    config: GRPOConfig
    history: list[dict[str, Any]]
    skips: SkipCounts
    drift: DriftCounts
    rollout_drift: dict[str, float]
    group_sampling: SamplingCounts
    tasks: Optional[TaskStream]
    evaluations: list[EvaluationReport]
    policy: Optional[Policy]


def run_state(run: RecordedRun) -> dict[str, Any]:
    """The run's `state.json` (without the agents' part): what a resumed run continues from, and what summaries are
    built from."""
    return {
        "step": run.step,
        "config": run.config.to_dict(),
        "history": run.history,
        "skips": run.skips.to_dict(),
        "drift": run.drift.to_dict(),
        "rollout_drift": run.rollout_drift,
        "group_sampling": run.group_sampling.to_dict(),
        "task_cursor": run.tasks.cursor if run.tasks is not None else 0,
        "evaluations": [e.to_dict() for e in run.evaluations],
        "base_model": run.policy.base_model_path if run.policy is not None else None,
    }


def restore_run_state(run: RecordedRun, step: int, state: Mapping[str, Any]) -> None:
    """Set `run`'s counters from the `state` of its checkpoint of `step` (the run then starts from that step)."""
    run.step = run.start_step = step
    run.history = list(state.get("history", []))
    run.skips = SkipCounts(**state.get("skips", {}))
    run.drift = DriftCounts.from_dict(state.get("drift", {}))
    run.rollout_drift = dict(state.get("rollout_drift", {}))
    run.group_sampling = SamplingCounts(**state.get("group_sampling", {}))
    assert run.tasks is not None
    run.tasks.cursor = int(state.get("task_cursor", step * run.config.schedule.tasks_per_step))
    run.evaluations = [
        EvaluationReport(**{k: v for k, v in e.items() if k != "n"}) for e in state.get("evaluations", [])
    ]


@contextlib.contextmanager
def timed(seconds: dict[str, float], phase: str) -> Iterator[None]:
    """Record the wall seconds of `phase` in `seconds` (also when it is interrupted)."""
    started = time.monotonic()
    try:
        yield
    finally:
        seconds[phase] = round(time.monotonic() - started, 3)
