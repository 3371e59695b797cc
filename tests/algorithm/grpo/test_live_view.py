"""The GRPO progress display shows what a multi-turn run needs watching: calls per rollout, informative groups and
the drift rate (of the last step and of the run so far)."""

from __future__ import annotations

from typing import Any

import pytest

from agentlightning.algorithm.grpo.live import GRPOLiveView


def _step(step: int, continuations: int, drifted: int) -> dict[str, Any]:
    rate = drifted / continuations if continuations else 0.0
    return {
        "step": step,
        "reward_mean": 0.5,
        "samples": 8,
        "tasks": 3,
        "informative_groups": 2,
        "calls_per_rollout": 2.5,
        "drift": {"continuations": continuations, "drifted": drifted, "rate": rate},
        "seconds": {"total": 1.0},
    }


def test_plain_progress_lines_show_calls_groups_and_drift(capsys: pytest.CaptureFixture[str]) -> None:
    view = GRPOLiveView("test", live=False)
    view.on_event("step", _step(1, continuations=10, drifted=0))
    view.on_event("step", _step(2, continuations=10, drifted=5))
    lines = capsys.readouterr().out.splitlines()
    assert "2.5 calls/rollout, 2 informative groups of 3 tasks, drift 0% (run 0%)" in lines[0]
    assert "drift 50% (run 25%)" in lines[1]


def test_the_live_panel_has_a_multi_turn_row() -> None:
    from rich.console import Console

    view = GRPOLiveView("test", live=False)
    view.on_event("step", _step(1, continuations=4, drifted=1))
    console = Console(width=200, record=True)
    console.print(view._render())
    text = console.export_text()
    assert "multi-turn" in text and "drift 25% (run 25%)" in text
