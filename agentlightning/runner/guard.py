"""One loop at a time per runner: `step` and `iter` refuse to start while the same runner runs either.

A runner holds one heartbeat with one current attempt, one agent invoker and one resources cache: two rollouts run
concurrently on one runner would overwrite each other's attempt in the heartbeat (the other goes unresponsive) and
stop each other's heartbeat. Concurrent rollouts need one runner each (`copy.deepcopy(runner)` gives an
uninitialised copy; the Trainer's strategies do this per worker).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from types import CoroutineType
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["one_at_a_time"]

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_running: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def one_at_a_time(
    method: Callable[Concatenate[S, P], CoroutineType[Any, Any, R]],
) -> Callable[Concatenate[S, P], CoroutineType[Any, Any, R]]:
    """Decorate a runner's async loop method so that it raises RuntimeError when the runner already runs one."""

    @functools.wraps(method)
    async def guarded(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        name = method.__name__
        with _lock:
            busy = _running.get(self)
            if busy is None:
                _running[self] = name
        if busy is not None:
            raise RuntimeError(
                f"{type(self).__name__}.{name}() cannot start: this runner is running {busy}() already, and a runner "
                "runs one rollout at a time. Run concurrent tasks on separate runners (copy.deepcopy(runner), each "
                "in its own run_context) or use Trainer(n_runners=N)."
            )
        try:
            return await method(self, *args, **kwargs)
        finally:
            with _lock:
                _running.pop(self, None)

    return guarded
