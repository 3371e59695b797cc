"""Helpers shared by algorithms: batches drawn from a dataset, and decorators that hand a method its store or proxy.

`batch_iter_over_dataset` is how APO draws its gradient and validation batches; `with_store` and `with_llm_proxy`
let an algorithm's coroutine methods receive the store / LLM proxy the trainer wired in, as an explicit argument.
"""

from __future__ import annotations

import functools
import inspect
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, Literal, Optional, TypeVar, overload

from typing_extensions import ParamSpec

from agentlightning.types import Dataset

if TYPE_CHECKING:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store.base import LightningStore

    from .base import Algorithm

__all__ = ["batch_iter_over_dataset", "with_llm_proxy", "with_store"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
AlgorithmT = TypeVar("AlgorithmT", bound="Algorithm")


def batch_iter_over_dataset(
    dataset: Dataset[T], batch_size: int, *, rng: Optional[random.Random] = None
) -> Iterator[Sequence[T]]:
    """An endless iterator of batches of `batch_size` tasks from `dataset`.

    When `batch_size` covers the dataset, every batch is the whole dataset in a fresh random order. Otherwise the
    indices are shuffled once per pass and cut into batches; a batch left incomplete at the end of a pass is filled
    from the next pass with tasks it does not already hold, so a batch never repeats a task.

    Args:
        dataset: anything indexable with a length (a list of tasks).
        batch_size: tasks per batch, at least 1.
        rng: the random generator to shuffle with (default: the `random` module).

    Raises:
        ValueError: the dataset is empty or `batch_size` is below 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    size = len(dataset)
    if size == 0:
        raise ValueError("Cannot draw batches from an empty dataset")
    shuffle = (rng or random).shuffle  # type: ignore[attr-defined]

    def generate() -> Iterator[Sequence[T]]:
        if batch_size >= size:
            while True:
                order = list(range(size))
                shuffle(order)
                yield [dataset[index] for index in order]
        upcoming: deque[int] = deque()
        while True:
            batch: list[int] = []
            skipped: list[int] = []
            while len(batch) < batch_size:
                if not upcoming:
                    order = list(range(size))
                    shuffle(order)
                    upcoming.extend(order)
                index = upcoming.popleft()
                (skipped if index in batch else batch).append(index)
            upcoming.extendleft(reversed(skipped))  # tasks skipped as duplicates lead the next batch
            yield [dataset[index] for index in batch]

    return generate()


def with_store(
    func: Callable[Concatenate[AlgorithmT, LightningStore, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[AlgorithmT, P], Coroutine[Any, Any, R]]:
    """Decorate an algorithm's coroutine method so it receives `self.get_store()` as its first argument after self.

    The store is looked up on every call, so the method sees whichever store the trainer wired in last.
    """
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"with_store decorates coroutine methods; {func.__qualname__} is not one")

    @functools.wraps(func)
    async def wrapper(self: AlgorithmT, *args: P.args, **kwargs: P.kwargs) -> R:
        return await func(self, self.get_store(), *args, **kwargs)

    return wrapper


@overload
def with_llm_proxy(
    required: Literal[False] = False, auto_start: bool = True
) -> Callable[
    [Callable[Concatenate[AlgorithmT, Optional[LLMProxy], P], Coroutine[Any, Any, R]]],
    Callable[Concatenate[AlgorithmT, P], Coroutine[Any, Any, R]],
]: ...


@overload
def with_llm_proxy(
    required: Literal[True], auto_start: bool = True
) -> Callable[
    [Callable[Concatenate[AlgorithmT, LLMProxy, P], Coroutine[Any, Any, R]]],
    Callable[Concatenate[AlgorithmT, P], Coroutine[Any, Any, R]],
]: ...


def with_llm_proxy(
    required: bool = False, auto_start: bool = True
) -> Callable[[Callable[..., Coroutine[Any, Any, Any]]], Callable[..., Coroutine[Any, Any, Any]]]:
    """Decorate an algorithm's coroutine method so it receives `self.get_llm_proxy()` after self.

    Args:
        required: raise ValueError when no proxy was set (otherwise the method receives None).
        auto_start: start a proxy that is not running before the call and stop it afterwards (a proxy that was
            already running is left alone).
    """

    def decorator(func: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Coroutine[Any, Any, Any]]:
        if not inspect.iscoroutinefunction(func):
            raise TypeError(f"with_llm_proxy decorates coroutine methods; {func.__qualname__} is not one")

        @functools.wraps(func)
        async def wrapper(self: Algorithm, *args: Any, **kwargs: Any) -> Any:
            proxy = self.get_llm_proxy()
            if proxy is None and required:
                raise ValueError(
                    f"{func.__qualname__} needs an LLM proxy, but none was set: pass llm_proxy= to the Trainer or "
                    "call set_llm_proxy() first"
                )
            started_here = False
            if proxy is not None and auto_start and not proxy.is_running():
                logger.info("Starting the LLM proxy for %s (stopped again when it returns)", func.__qualname__)
                await _maybe_await(proxy.start())
                started_here = True
            try:
                return await func(self, proxy, *args, **kwargs)
            finally:
                if started_here and proxy is not None:
                    await _maybe_await(proxy.stop())

        return wrapper

    return decorator


async def _maybe_await(value: Any) -> None:
    # LLMProxy.start/stop return an object that is both awaitable and already done when called synchronously.
    if isinstance(value, Awaitable):
        await value
