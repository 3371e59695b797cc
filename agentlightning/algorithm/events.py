"""Algorithm events, and what a progress display makes of them.

An algorithm tells listeners what it is doing as `(kind, payload)` events (`Algorithm.add_event_listener`; GRPO emits
"resumed", "rollouts", "update", "step", "evaluation" and "checkpoint"). `AlgorithmProgress` folds them into what the
Trainer's progress display (agentlightning/trainer/progress.py) shows beside the rollout counts: the step and the time
budget, the reward per step with a sparkline, the last step's seconds by part, its health and active warnings, the
evaluations, the rollouts of the running step and notes (resumed, last checkpoint). It renders them as panel rows or,
off a terminal, as one line per step and per evaluation; it does no I/O (the display prints and draws). Events arrive
on the algorithm's thread and the display reads on its own, so the state is guarded by a lock.

It lives with the algorithms, which define the events, so that the trainer layer above may show it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Optional

__all__ = ["AlgorithmProgress", "EventListener", "describe_health", "sparkline"]

EventListener = Callable[[str, dict[str, Any]], None]
"""Called with `(kind, payload)` for each event. Every listener gets the same payload: read it, never change it."""

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 40, *, low: float = 0.0, high: float = 1.0) -> str:
    """The last `width` values as block characters, `low` the lowest bar and `high` the highest (clipped to them)."""
    span = high - low if high > low else 1.0
    top = len(_BARS) - 1
    return "".join(_BARS[min(top, max(0, int((v - low) / span * top + 0.5)))] for v in values[-width:])


def _share(value: Any) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def describe_health(health: dict[str, Any]) -> str:
    """One line of a step's health record: informative groups, entropy, tools, truncation, sampler gap."""
    parts = [f"informative groups {_share(health.get('informative_share'))}"]
    if health.get("entropy") is not None:
        parts.append(f"entropy {health['entropy']:.3f}")
    tools = health.get("tool_calls")
    if tools and tools.get("top_tool") is not None:
        parts.append(
            f"tool calls valid {_share(tools.get('validity'))}, top {tools['top_tool']} {_share(tools['top_share'])}"
        )
    for name, label in (("truncation_rate", "truncated"), ("drift_rate", "drift")):
        if health.get(name) is not None:
            parts.append(f"{label} {_share(health[name])}")
    if health.get("sampler_gap_mean") is not None:
        parts.append(f"sampler gap {health['sampler_gap_mean']:.3f}")
    strata = health.get("reward_by_stratum")
    if strata:
        parts.append("reward " + ", ".join(f"{key} {value:.2f}" for key, value in strata.items()))
    return ", ".join(parts)


def _seconds(seconds: dict[str, Any]) -> str:
    return ", ".join(f"{part} {value:.1f}s" for part, value in seconds.items())


class AlgorithmProgress:
    """What an algorithm's events said so far (see the module docstring).

    Args:
        minutes: the algorithm's time budget, shown beside the step (None: none known).
    """

    def __init__(self, *, minutes: Optional[float] = None) -> None:
        self.minutes = minutes
        self.started = time.monotonic()
        self.step = 0
        self.rewards: list[float] = []  # each step's mean reward
        self.last: dict[str, Any] = {}  # the last "step" event
        self.rollouts: tuple[int, int] = (0, 0)  # done and total of the running step (or evaluation)
        self.rollouts_mode = "train"
        self.evaluations: dict[str, Optional[float]] = {}  # label -> mean reward
        self.notes: list[str] = []
        self.drift = {"continuations": 0, "drifted": 0}  # the run's multi-turn calls so far
        self.warnings: list[dict[str, Any]] = []  # the health warnings active at the last step
        self.events = 0
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------------------- events
    def update(self, kind: str, payload: dict[str, Any]) -> bool:
        """Fold one event in; False when it repeats the rollout count already shown (nothing new to show)."""
        with self._lock:
            if kind == "rollouts":
                rollouts = (int(payload.get("done", 0)), int(payload.get("total", 0)))
                mode = str(payload.get("mode", "train"))
                if (rollouts, mode) == (self.rollouts, self.rollouts_mode):
                    return False
                self.rollouts, self.rollouts_mode = rollouts, mode
            elif kind == "step":
                self.step = int(payload.get("step", self.step + 1))
                self.last = payload
                if payload.get("reward_mean") is not None:
                    self.rewards.append(float(payload["reward_mean"]))
                drift = payload.get("drift") or {}
                for key in self.drift:
                    self.drift[key] += int(drift.get(key, 0))
                self.warnings = list(payload.get("warnings") or [])
            elif kind == "evaluation":
                self.evaluations[str(payload.get("label"))] = payload.get("mean_reward")
            elif kind == "resumed":
                self.step = int(payload.get("step", self.step))
                self.notes.append(f"resumed from {payload.get('path')} (step {payload.get('step')})")
            elif kind == "checkpoint":
                self.notes = [note for note in self.notes if not note.startswith("checkpoint")]
                self.notes.append(f"checkpoint: step {payload.get('step')}")
            self.events += 1
            return True

    # ------------------------------------------------------------------------------------------- rendering
    def lines(self, kind: str, payload: dict[str, Any]) -> list[str]:
        """The log lines of the event just folded in: a step's line, its health and each warning that starts at it;
        an evaluation's line; the note of a resumed run. None for the other kinds."""
        with self._lock:
            if kind == "step":
                reward = payload.get("reward_mean")
                lines = [
                    f"step {payload.get('step')}: reward {'n/a' if reward is None else f'{reward:.3f}'}, "
                    f"{payload.get('samples', 0)} samples, {self._multi_turn()}, {_seconds(payload.get('seconds', {}))}"
                ]
                if payload.get("health"):
                    lines.append(f"  health: {describe_health(payload['health'])}")
                lines += [
                    f"  warning: {warning.get('message', '')} {warning.get('fix', '')}"
                    for warning in self.warnings
                    if warning.get("since") == payload.get("step")
                ]
                return lines
            if kind == "evaluation":
                mean = payload.get("mean_reward")
                tasks = f" over {payload['n']} tasks" if payload.get("n") is not None else ""
                return [
                    f"evaluation {payload.get('label')} at step {payload.get('step', self.step)}: mean reward "
                    f"{'n/a' if mean is None else f'{mean:.3f}'}{tasks}"
                ]
            if kind == "resumed":
                return [self.notes[-1]]
            return []

    def rows(self) -> list[tuple[str, str]]:
        """The panel rows, `(label, text with rich markup)`; none before the first event."""
        with self._lock:
            if not self.events:
                return []
            budget = f" of {self.minutes:g} min" if self.minutes else " min"
            rows = [("step", f"{self.step}  ({(time.monotonic() - self.started) / 60:.1f}{budget})")]
            done, total = self.rollouts
            if total:
                running = "step" if self.rollouts_mode == "train" else "evaluation"
                rows.append(("step rollouts", f"{done}/{total} of the running {running}"))
            if self.rewards:
                recent = self.rewards[-5:]
                rows.append(("step reward", f"{self.rewards[-1]:.3f} (last 5: {sum(recent) / len(recent):.3f})"))
                low, high = min(0.0, *self.rewards), max(1.0, *self.rewards)
                rows.append(("curve", sparkline(self.rewards, low=low, high=high)))
            if self.last:
                rows.append(("multi-turn", self._multi_turn()))
            if self.last.get("health"):
                rows.append(("health", describe_health(self.last["health"])))
            rows += [
                ("[bold yellow]warning[/]", f"{w.get('message', '')} [dim]{w.get('fix', '')}[/]") for w in self.warnings
            ]
            if self.last.get("seconds"):
                rows.append(("last step", _seconds(self.last["seconds"])))
            rows += [(f"eval {label}", "n/a" if v is None else f"{v:.3f}") for label, v in self.evaluations.items()]
            rows += [("", note) for note in self.notes[-3:]]
            return rows

    def _multi_turn(self) -> str:
        """Calls per rollout, informative groups and the drift rate (last step; run so far)."""
        last = self.last
        calls = last.get("calls_per_rollout")
        drift = last.get("drift") or {}
        run_rate = self.drift["drifted"] / self.drift["continuations"] if self.drift["continuations"] else 0.0
        groups = last.get("informative_groups")
        return (
            f"{'n/a' if calls is None else f'{calls:.1f}'} calls/rollout, "
            f"{'n/a' if groups is None else groups} informative groups of {last.get('tasks', 'n/a')} tasks, "
            f"drift {100 * float(drift.get('rate', 0.0)):.0f}% (run {100 * run_rate:.0f}%)"
        )
