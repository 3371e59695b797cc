"""`@algo`: a function becomes an Algorithm; `run` injects what its signature names."""

from __future__ import annotations

import inspect
from typing import Any, Optional

import pytest

from agentlightning import Algorithm, InMemoryLightningStore, PromptTemplate, TraceToMessages
from agentlightning.algorithm import FunctionalAlgorithm, algo


@algo
def takes_datasets(train_dataset: Optional[list[int]] = None, val_dataset: Optional[list[int]] = None) -> Any:
    """Returns its datasets."""
    return (train_dataset, val_dataset)


@algo
async def async_takes_store(store: Any, train_dataset: Any = None) -> Any:
    return (store, train_dataset)


def test_the_decorated_function_is_still_callable_directly() -> None:
    assert takes_datasets([1], [2]) == ([1], [2])


def test_name_doc_and_signature_are_preserved() -> None:
    assert takes_datasets.__name__ == "takes_datasets"
    assert takes_datasets.__doc__ == "Returns its datasets."
    assert list(inspect.signature(takes_datasets).parameters) == ["train_dataset", "val_dataset"]
    assert isinstance(takes_datasets, FunctionalAlgorithm)
    assert isinstance(takes_datasets, Algorithm)


def test_run_forwards_datasets_and_returns_none_for_sync_functions() -> None:
    seen: list[Any] = []

    @algo
    def record(train_dataset: Any = None, val_dataset: Any = None) -> None:
        seen.append((train_dataset, val_dataset))

    assert record.run([1], [2]) is None
    assert record.run(None, None) is None
    assert seen == [([1], [2]), (None, None)]
    assert not record.is_async()


async def test_async_functions_return_awaitables_from_run_and_from_a_direct_call() -> None:
    store = InMemoryLightningStore()
    async_takes_store.set_store(store)
    assert async_takes_store.is_async()
    assert await async_takes_store.run([1]) == (store, [1])  # type: ignore[misc]
    assert await async_takes_store("s", [2]) == ("s", [2])


def test_a_dataset_the_function_cannot_take_is_a_type_error() -> None:
    @algo
    def only_store(store: Any) -> None: ...

    only_store.set_store(InMemoryLightningStore())
    with pytest.raises(TypeError, match="train_dataset is provided but not supported"):
        only_store.run([1])
    with pytest.raises(TypeError, match="val_dataset is provided but not supported"):
        only_store.run(None, [1])
    assert only_store.run() is None  # nothing to pass: fine


def test_references_are_injected_by_parameter_name() -> None:
    captured: dict[str, Any] = {}

    @algo
    def everything(store: Any, adapter: Any, llm_proxy: Any, initial_resources: Any) -> None:
        captured.update(store=store, adapter=adapter, llm_proxy=llm_proxy, initial_resources=initial_resources)

    store, adapter = InMemoryLightningStore(), TraceToMessages()
    resources = {"prompt": PromptTemplate(template="{q}", engine="f-string")}
    everything.set_store(store)
    everything.set_adapter(adapter)
    everything.set_initial_resources(resources)  # type: ignore[arg-type]
    everything.run()
    assert captured == {"store": store, "adapter": adapter, "llm_proxy": None, "initial_resources": resources}


def test_var_keyword_functions_get_nothing_injected() -> None:
    captured: list[dict[str, Any]] = []

    @algo
    def loose(**kwargs: Any) -> None:
        captured.append(kwargs)

    loose.set_store(InMemoryLightningStore())
    loose.run()
    assert captured == [{}]


def test_decorated_algorithms_are_independent() -> None:
    @algo
    def first(store: Any) -> None: ...

    @algo
    def second(store: Any) -> None: ...

    first.set_store(InMemoryLightningStore())
    with pytest.raises(ValueError, match="store"):
        second.run()


def test_algo_needs_a_callable() -> None:
    with pytest.raises(TypeError, match="needs a function"):
        algo(42)  # type: ignore[arg-type]


def test_initial_resources_a_function_cannot_receive_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    @algo
    def ignores_resources(train_dataset: Any = None) -> None:
        return None

    ignores_resources.set_initial_resources({"prompt": PromptTemplate(template="t", engine="f-string")})
    ignores_resources.run([1])
    assert "has no `initial_resources` parameter: they are not published" in caplog.text


def test_initial_resources_a_function_receives_are_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    @algo
    def takes_resources(initial_resources: Any, train_dataset: Any = None) -> None:
        return None

    takes_resources.set_initial_resources({"prompt": PromptTemplate(template="t", engine="f-string")})
    takes_resources.run([1])
    assert "initial_resources" not in caplog.text
