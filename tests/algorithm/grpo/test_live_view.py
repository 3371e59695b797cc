"""`GRPOLiveView` is deprecated (the Trainer's progress shows GRPO's events) but still works for one release: it warns
and shows the same lines as the Trainer's log mode."""

from __future__ import annotations

import pytest

from agentlightning.algorithm.grpo.live import GRPOLiveView

from ..test_events import step


def test_the_deprecated_view_warns_and_still_prints_a_line_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(DeprecationWarning, match="Trainer.fit's progress shows GRPO's events"):
        view = GRPOLiveView("test", live=False)
    view.on_event("step", step(1, continuations=10, drifted=0))
    assert capsys.readouterr().out.startswith("step 1: reward 0.500, 8 samples, 2.5 calls/rollout")


def test_the_deprecated_view_renders_the_same_rows_as_the_trainers_panel() -> None:
    from rich.console import Console

    with pytest.warns(DeprecationWarning):
        view = GRPOLiveView("test", live=False)
    view.on_event("step", step(1, continuations=4, drifted=1))
    console = Console(width=200, record=True)
    console.print(view._render())
    text = console.export_text()
    assert "multi-turn" in text and "drift 25% (run 25%)" in text
