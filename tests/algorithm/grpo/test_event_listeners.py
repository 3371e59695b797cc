"""GRPO's events reach `on_event` and every listener of `add_event_listener` (the Trainer's progress); a callback that
raises is logged and the others still hear the event."""

from __future__ import annotations

from typing import Any

import pytest

from agentlightning.algorithm.grpo import GRPO


def test_an_event_reaches_on_event_then_every_listener_even_when_one_raises(caplog: pytest.LogCaptureFixture) -> None:
    heard: list[str] = []

    def broken(kind: str, payload: dict[str, Any]) -> None:
        raise RuntimeError("display gone")

    algorithm = GRPO(on_event=lambda kind, payload: heard.append(f"on_event {kind} {payload['step']}"))
    algorithm.add_event_listener(broken)
    algorithm.add_event_listener(lambda kind, payload: heard.append(f"listener {kind} {payload['step']}"))
    with caplog.at_level("WARNING"):
        algorithm._emit("checkpoint", step=3, path="x", final=False)
    assert heard == ["on_event checkpoint 3", "listener checkpoint 3"]
    assert "GRPO event listener" in caplog.text and "display gone" in caplog.text


def test_an_on_event_that_raises_is_logged_and_the_listeners_still_hear(caplog: pytest.LogCaptureFixture) -> None:
    heard: list[str] = []

    def broken(kind: str, payload: dict[str, Any]) -> None:
        raise RuntimeError("callback gone")

    algorithm = GRPO(on_event=broken)
    algorithm.add_event_listener(lambda kind, payload: heard.append(kind))
    with caplog.at_level("WARNING"):
        algorithm._emit("checkpoint", step=3, path="x", final=False)
    assert heard == ["checkpoint"]
    assert "callback gone" in caplog.text
