"""Algorithm helpers: batches over a dataset, and the store / LLM-proxy injecting decorators."""

from __future__ import annotations

import itertools
import random
from typing import Any, Optional

import pytest

from agentlightning import Algorithm, InMemoryLightningStore
from agentlightning.algorithm.utils import batch_iter_over_dataset, with_llm_proxy, with_store


def test_a_batch_size_covering_the_dataset_yields_the_whole_dataset_reshuffled() -> None:
    batches = list(itertools.islice(batch_iter_over_dataset([1, 2, 3], 5, rng=random.Random(0)), 4))
    assert all(sorted(batch) == [1, 2, 3] for batch in batches)
    assert len({tuple(batch) for batch in batches}) > 1


def test_batches_cover_every_task_once_per_pass() -> None:
    data = list(range(12))
    batches = list(itertools.islice(batch_iter_over_dataset(data, 4, rng=random.Random(1)), 3))
    assert sorted(item for batch in batches for item in batch) == data


def test_a_batch_spanning_two_passes_never_repeats_a_task() -> None:
    data = list(range(5))
    for batch in itertools.islice(batch_iter_over_dataset(data, 3, rng=random.Random(2)), 50):
        assert len(batch) == 3
        assert len(set(batch)) == 3


def test_tasks_skipped_as_duplicates_are_not_lost() -> None:
    data = list(range(5))
    drawn = [
        item for batch in itertools.islice(batch_iter_over_dataset(data, 3, rng=random.Random(3)), 20) for item in batch
    ]
    counts = [drawn.count(item) for item in data]
    assert max(counts) - min(counts) <= 2  # every task keeps coming back at the same rate


def test_batches_are_reproducible_with_a_seeded_generator() -> None:
    first = list(itertools.islice(batch_iter_over_dataset(list(range(7)), 3, rng=random.Random(9)), 5))
    second = list(itertools.islice(batch_iter_over_dataset(list(range(7)), 3, rng=random.Random(9)), 5))
    assert first == second


@pytest.mark.parametrize("size", [0, -1])
def test_a_batch_size_below_one_is_rejected(size: int) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        batch_iter_over_dataset([1], size)


def test_an_empty_dataset_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty dataset"):
        batch_iter_over_dataset([], 2)


class _ProxyStandIn:
    """Just the start/stop/is_running surface the decorator uses."""

    def __init__(self, running: bool = False) -> None:
        self.running = running
        self.events: list[str] = []

    def is_running(self) -> bool:
        return self.running

    async def start(self) -> None:
        self.running = True
        self.events.append("start")

    async def stop(self) -> None:
        self.running = False
        self.events.append("stop")


class _Algo(Algorithm):
    @with_store
    async def count_rollouts(self, store: Any, extra: int = 0) -> int:
        return len(await store.query_rollouts()) + extra

    @with_llm_proxy()
    async def seen_proxy(self, proxy: Optional[Any]) -> Optional[Any]:
        return proxy

    @with_llm_proxy(required=True)
    async def needs_proxy(self, proxy: Any) -> bool:
        return proxy.is_running()

    @with_llm_proxy(auto_start=False)
    async def no_start(self, proxy: Optional[Any]) -> bool:
        return bool(proxy and proxy.is_running())


async def test_with_store_passes_the_algorithm_store() -> None:
    algorithm = _Algo()
    store = InMemoryLightningStore()
    await store.enqueue_rollout({"q": 1})
    algorithm.set_store(store)
    assert await algorithm.count_rollouts(extra=1) == 2


async def test_with_store_without_a_store_raises() -> None:
    with pytest.raises(ValueError, match="store"):
        await _Algo().count_rollouts()


async def test_with_llm_proxy_gives_none_when_no_proxy_is_set() -> None:
    assert await _Algo().seen_proxy() is None


async def test_with_llm_proxy_required_raises_without_a_proxy() -> None:
    with pytest.raises(ValueError, match="needs an LLM proxy"):
        await _Algo().needs_proxy()


async def test_with_llm_proxy_starts_a_stopped_proxy_and_stops_it_afterwards() -> None:
    algorithm, proxy = _Algo(), _ProxyStandIn()
    algorithm.set_llm_proxy(proxy)  # type: ignore[arg-type]
    assert await algorithm.needs_proxy() is True
    assert proxy.events == ["start", "stop"]


async def test_with_llm_proxy_leaves_a_running_proxy_alone() -> None:
    algorithm, proxy = _Algo(), _ProxyStandIn(running=True)
    algorithm.set_llm_proxy(proxy)  # type: ignore[arg-type]
    assert await algorithm.needs_proxy() is True
    assert proxy.events == [] and proxy.running


async def test_with_llm_proxy_without_auto_start_does_not_start_it() -> None:
    algorithm, proxy = _Algo(), _ProxyStandIn()
    algorithm.set_llm_proxy(proxy)  # type: ignore[arg-type]
    assert await algorithm.no_start() is False
    assert proxy.events == []


def test_the_decorators_refuse_plain_functions() -> None:
    with pytest.raises(TypeError, match="coroutine"):
        with_store(lambda self, store: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="coroutine"):
        with_llm_proxy()(lambda self, proxy: None)
