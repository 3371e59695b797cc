"""Deprecated: `GRPOLiveView`, GRPO's own progress panel, is part of the Trainer's progress display now.

`Trainer.fit` shows GRPO's events (step, time budget, reward curve, timing, health, warnings, evaluations) beside the
rollout counts, in its live panel or, with `progress="log"`, as log lines: drop `on_event=view.on_event`, the
`with view:` block and `progress="off"`. This module stays importable for one release; the view below folds the
events into the same `AlgorithmProgress` the Trainer uses (agentlightning/algorithm/events.py) and shows it as before.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Optional

from ..events import AlgorithmProgress, describe_health, sparkline

__all__ = ["GRPOLiveView", "describe_health", "sparkline"]


class GRPOLiveView:
    """Deprecated (see the module docstring): a rich panel, or lines on stdout, of GRPO's events."""

    def __init__(self, title: str, *, minutes: Optional[float] = None, live: Optional[bool] = None) -> None:
        warnings.warn(
            "GRPOLiveView is deprecated: Trainer.fit's progress shows GRPO's events (drop on_event=view.on_event "
            'and progress="off"; progress="log" gives plain lines)',
            DeprecationWarning,
            stacklevel=2,
        )
        self.title = title
        self.live = sys.stdout.isatty() if live is None else live
        self.progress = AlgorithmProgress(minutes=minutes)
        self._live: Any = None

    def __enter__(self) -> GRPOLiveView:
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

    def on_event(self, kind: str, payload: dict[str, Any]) -> None:
        if self.progress.update(kind, payload) and not self.live:
            for line in self.progress.lines(kind, payload):
                print(line, flush=True)
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Any:
        from rich.panel import Panel
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan")
        table.add_column()
        for label, text in self.progress.rows():
            table.add_row(label, text)
        return Panel(table, title=self.title, expand=False)
