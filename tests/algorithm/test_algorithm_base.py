"""The Algorithm contract: references the trainer hands in, and how `run` is dispatched."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from agentlightning import Algorithm, FastAlgorithm, InMemoryLightningStore, PromptTemplate, TraceToMessages


class _Recorder(Algorithm):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any]] = []

    def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        self.calls.append((train_dataset, val_dataset))


class _AsyncAlgorithm(FastAlgorithm):
    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        return None


class _Owner:
    """Stands in for a trainer: anything weak-referenceable."""


def test_sync_run_is_not_async_and_call_delegates_to_run() -> None:
    algorithm = _Recorder()
    assert not algorithm.is_async()
    algorithm([1], val_dataset=[2])
    assert algorithm.calls == [([1], [2])]


def test_async_run_is_async() -> None:
    assert _AsyncAlgorithm().is_async()


def test_unset_references_raise_value_error() -> None:
    algorithm = _Recorder()
    with pytest.raises(ValueError, match="trainer"):
        algorithm.get_trainer()
    with pytest.raises(ValueError, match="store"):
        algorithm.get_store()
    with pytest.raises(ValueError, match="adapter"):
        algorithm.get_adapter()
    assert algorithm.get_llm_proxy() is None
    assert algorithm.get_initial_resources() is None


def test_trainer_and_adapter_are_weak_references() -> None:
    algorithm = _Recorder()
    owner, adapter = _Owner(), TraceToMessages()
    algorithm.set_trainer(owner)
    algorithm.set_adapter(adapter)
    assert algorithm.get_trainer() is owner
    assert algorithm.trainer is owner
    assert algorithm.get_adapter() is adapter
    del owner, adapter
    gc.collect()
    with pytest.raises(ValueError, match="garbage-collected"):
        algorithm.get_trainer()
    with pytest.raises(ValueError, match="garbage-collected"):
        algorithm.get_adapter()


def test_store_is_held_strongly_and_resources_are_kept() -> None:
    algorithm = _Recorder()
    algorithm.set_store(InMemoryLightningStore())
    gc.collect()
    assert isinstance(algorithm.get_store(), InMemoryLightningStore)
    resources = {"prompt": PromptTemplate(template="Q: {q}", engine="f-string")}
    algorithm.set_initial_resources(resources)  # type: ignore[arg-type]
    assert algorithm.get_initial_resources() == resources


def test_references_are_per_instance() -> None:
    first, second = _Recorder(), _Recorder()
    owner = _Owner()
    first.set_trainer(owner)
    with pytest.raises(ValueError):
        second.get_trainer()


def test_a_subclass_without_run_explains_itself() -> None:
    with pytest.raises(NotImplementedError, match="must implement run"):
        Algorithm().run()


def test_every_event_listener_hears_an_emitted_event_even_after_one_raises(caplog: pytest.LogCaptureFixture) -> None:
    algorithm = _Recorder()
    heard: list[tuple[str, str, dict[str, Any]]] = []

    def broken(kind: str, payload: dict[str, Any]) -> None:
        raise RuntimeError("display gone")

    algorithm.add_event_listener(lambda kind, payload: heard.append(("first", kind, payload)))
    algorithm.add_event_listener(broken)
    algorithm.add_event_listener(lambda kind, payload: heard.append(("last", kind, payload)))
    with caplog.at_level("WARNING", logger="agentlightning.algorithm.base"):
        algorithm.emit_event("step", {"step": 1})
    assert heard == [("first", "step", {"step": 1}), ("last", "step", {"step": 1})]
    assert "failed on step" in caplog.text and "display gone" in caplog.text


class _Display:
    def __init__(self) -> None:
        self.heard: list[str] = []

    def on_event(self, kind: str, payload: dict[str, Any]) -> None:
        self.heard.append(kind)


def test_a_removed_event_listener_hears_nothing_more_and_listeners_are_per_instance() -> None:
    first, second = _Recorder(), _Recorder()
    display = _Display()
    first.add_event_listener(display.on_event)
    second.emit_event("step", {})
    first.emit_event("evaluation", {})
    first.remove_event_listener(display.on_event)  # a bound method: an equal one, not the same object
    first.emit_event("checkpoint", {})
    assert display.heard == ["evaluation"]
