"""`GRPOLiveView`: a rich live panel (or plain log lines off a terminal) following a GRPO run's events.

Pass `view.on_event` as `GRPO(on_event=...)` and use the view as a context manager around `Trainer.fit`.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Optional

__all__ = ["GRPOLiveView"]

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 40) -> str:
    """The last `width` values (in 0..1) as block characters."""
    tail = values[-width:]
    return "".join(_BARS[min(len(_BARS) - 1, max(0, int(v * (len(_BARS) - 1) + 0.5)))] for v in tail)


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


class GRPOLiveView:
    """Shows step, time budget, reward curve, last step's timing split, rollouts of the running step, evaluations."""

    def __init__(self, title: str, *, minutes: Optional[float] = None, live: Optional[bool] = None) -> None:
        self.title = title
        self.minutes = minutes
        self.live = sys.stdout.isatty() if live is None else live
        self.started = time.monotonic()
        self.step = 0
        self.rewards: list[float] = []
        self.last: dict[str, Any] = {}
        self.rollouts = (0, 0)
        self.evaluations: dict[str, Any] = {}
        self.notes: list[str] = []
        self.drift = {"continuations": 0, "drifted": 0}  # the run's multi-turn calls so far
        self.warnings: list[dict[str, Any]] = []  # the health warnings active at the last step
        self._lock = threading.Lock()
        self._live: Any = None

    # -------------------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> GRPOLiveView:
        self.started = time.monotonic()
        if self.live:
            from rich.live import Live

            self._live = Live(self._render(), refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)
            self._live = None

    # ----------------------------------------------------------------------------------------------- events
    def on_event(self, kind: str, payload: dict[str, Any]) -> None:
        with self._lock:
            if kind == "rollouts":
                self.rollouts = (payload["done"], payload["total"])
            elif kind == "step":
                self.step = payload["step"]
                self.last = payload
                if payload.get("reward_mean") is not None:
                    self.rewards.append(float(payload["reward_mean"]))
                drift = payload.get("drift") or {}
                for key in self.drift:
                    self.drift[key] += int(drift.get(key, 0))
                self.warnings = list(payload.get("warnings") or [])
                if not self.live:
                    seconds = payload.get("seconds", {})
                    reward = payload.get("reward_mean")
                    print(
                        f"step {self.step}: reward {'n/a' if reward is None else f'{reward:.3f}'}, "
                        f"{payload.get('samples', 0)} samples, {self._multi_turn()}, "
                        + ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items()),
                        flush=True,
                    )
                    if payload.get("health"):
                        print(f"  health: {describe_health(payload['health'])}", flush=True)
                    for warning in self.warnings:
                        if warning.get("since") == self.step:
                            print(f"  warning: {warning['message']} {warning['fix']}", flush=True)
            elif kind == "evaluation":
                self.evaluations[payload["label"]] = payload.get("mean_reward")
                if not self.live:
                    print(f"evaluation {payload['label']}: mean reward {payload.get('mean_reward')}", flush=True)
            elif kind == "resumed":
                self.note(f"resumed from {payload['path']} (step {payload['step']})")
            elif kind == "checkpoint":
                self.notes = [n for n in self.notes if not n.startswith("checkpoint")]
                self.notes.append(f"checkpoint: step {payload['step']}")
        if self._live is not None:
            self._live.update(self._render())

    def note(self, text: str) -> None:
        self.notes.append(text)
        if not self.live:
            print(text, flush=True)

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

    # ------------------------------------------------------------------------------------------------ render
    def _render(self) -> Any:
        from rich.panel import Panel
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan")
        table.add_column()
        elapsed = time.monotonic() - self.started
        budget = f" of {self.minutes:.0f} min" if self.minutes else ""
        table.add_row("time", f"{elapsed / 60:.1f} min{budget}")
        table.add_row("step", str(self.step))
        done, total = self.rollouts
        table.add_row("rollouts", f"{done}/{total} of the running step")
        if self.rewards:
            recent = self.rewards[-5:]
            table.add_row("reward", f"{self.rewards[-1]:.3f} (last 5: {sum(recent) / len(recent):.3f})")
            table.add_row("curve", sparkline(self.rewards))
        if self.last:
            table.add_row("multi-turn", self._multi_turn())
        if self.last.get("health"):
            table.add_row("health", describe_health(self.last["health"]))
        for warning in self.warnings:
            table.add_row("[bold yellow]warning[/]", f"{warning['message']} [dim]{warning['fix']}[/]")
        seconds = self.last.get("seconds")
        if seconds:
            table.add_row("last step", ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items()))
        for label, value in self.evaluations.items():
            table.add_row(f"eval {label}", "n/a" if value is None else f"{value:.3f}")
        for note in self.notes[-3:]:
            table.add_row("", note)
        return Panel(table, title=self.title, expand=False)
