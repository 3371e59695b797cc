"""`@algo`: turn a plain function (sync or async) into an Algorithm.

The function names what it needs as parameters — `store`, `adapter`, `llm_proxy`, `initial_resources`,
`train_dataset`, `val_dataset` — and `run` passes exactly those, read from what the trainer wired in.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Optional, Union

from agentlightning.types import Dataset

from .base import Algorithm

__all__ = ["FunctionalAlgorithm", "algo"]

_INJECTED = ("store", "adapter", "llm_proxy", "initial_resources")

logger = logging.getLogger(__name__)


class FunctionalAlgorithm(Algorithm):
    """An algorithm whose `run` is a user function; built by `@algo`.

    Calling the instance calls the function itself with the given arguments (so a decorated function is still
    usable as a function); `run(train_dataset, val_dataset)` injects what the function's signature asks for.
    """

    def __init__(self, algorithm_func: Callable[..., Any]) -> None:
        if not callable(algorithm_func):
            raise TypeError(f"@algo needs a function, got {type(algorithm_func).__name__}")
        self._algorithm_func = algorithm_func
        self._signature = inspect.signature(algorithm_func)
        self._is_async = inspect.iscoroutinefunction(algorithm_func)
        functools.update_wrapper(self, algorithm_func)

    def is_async(self) -> bool:
        return self._is_async

    def _accepts(self, name: str) -> bool:
        parameter = self._signature.parameters.get(name)
        return parameter is not None and parameter.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        )

    def run(
        self,
        train_dataset: Optional[Dataset[Any]] = None,
        val_dataset: Optional[Dataset[Any]] = None,
    ) -> Union[Awaitable[None], None]:
        """Call the function with the references and datasets it declares; returns its awaitable when async.

        Raises:
            TypeError: a dataset was given but the function has no parameter to receive it.
        """
        kwargs: dict[str, Any] = {}
        getters: dict[str, Callable[[], Any]] = {
            "store": self.get_store,
            "adapter": self.get_adapter,
            "llm_proxy": self.get_llm_proxy,
            "initial_resources": self.get_initial_resources,
        }
        for name in _INJECTED:
            if self._accepts(name):
                kwargs[name] = getters[name]()
        if self.get_initial_resources() and not self._accepts("initial_resources"):
            logger.warning(
                "Trainer(initial_resources=...) was given, but %s has no `initial_resources` parameter: they are not "
                "published, and rollouts run with whatever resources the algorithm publishes itself",
                self._algorithm_func.__qualname__,
            )
        for name, value in (("train_dataset", train_dataset), ("val_dataset", val_dataset)):
            if self._accepts(name):
                kwargs[name] = value
            elif value is not None:
                raise TypeError(
                    f"{name} is provided but not supported by {self._algorithm_func.__qualname__}: "
                    f"add a `{name}` parameter to the function"
                )
        result = self._algorithm_func(**kwargs)
        return result if self._is_async else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._algorithm_func(*args, **kwargs)


def algo(func: Callable[..., Any]) -> FunctionalAlgorithm:
    """Decorate a function to use it as an algorithm (`Trainer(algorithm=my_func)`).

    Example:
        >>> @algo
        ... async def best_of_three(*, store, train_dataset):
        ...     ...
    """
    return FunctionalAlgorithm(func)
