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


HEALTH = {
    "informative_share": 0.5,
    "entropy": 1.234,
    "tool_calls": {"validity": 0.75, "top_tool": "add", "top_share": 0.92},
    "truncation_rate": 0.4,
    "drift_rate": None,
    "reward_by_stratum": {"product": 0.0, "sum": 1.0},
}
COLLAPSE = {"code": "tool_collapse", "message": "92% of calls pick 'add'.", "fix": "Try balanced steps.", "since": 2}


def test_plain_progress_prints_the_health_and_a_warning_only_at_the_step_it_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    view = GRPOLiveView("test", live=False)
    for step in (2, 3):
        view.on_event("step", {**_step(step, 0, 0), "health": HEALTH, "warnings": [COLLAPSE]})
    out = capsys.readouterr().out
    assert out.count("warning: 92% of calls pick 'add'. Try balanced steps.") == 1
    assert (
        "health: informative groups 50%, entropy 1.234, tool calls valid 75%, top add 92%, truncated 40%, "
        "reward product 0.00, sum 1.00" in out
    )


def test_the_live_panel_shows_health_and_active_warnings() -> None:
    from rich.console import Console

    view = GRPOLiveView("test", live=False)
    view.on_event("step", {**_step(2, 0, 0), "health": HEALTH, "warnings": [COLLAPSE]})
    console = Console(width=250, record=True)
    console.print(view._render())
    text = console.export_text()
    assert "entropy 1.234" in text and "warning" in text and "92% of calls pick 'add'. Try balanced steps." in text
    view.on_event("step", {**_step(3, 0, 0), "health": HEALTH, "warnings": []})
    console = Console(width=250, record=True)
    console.print(view._render())
    assert "92% of calls" not in console.export_text()
