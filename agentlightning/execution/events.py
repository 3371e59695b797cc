"""`ExecutionEvent`: the cooperative stop flag shared by the algorithm and the runners.

Any side may set it; runners check it between rollouts and while waiting for work. `ThreadingEvent` serves threads
of one process, `MultiprocessingEvent` serves child processes (it is passed to them when they start).
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any, Optional, Protocol

__all__ = ["ExecutionEvent", "MultiprocessingEvent", "ThreadingEvent"]


class ExecutionEvent(Protocol):
    """What strategies, algorithms and runners need from a stop flag."""

    def set(self) -> None: ...

    def clear(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: Optional[float] = None) -> bool: ...


class _DelegatingEvent:
    """Forwards the ExecutionEvent methods to `_event`."""

    __slots__ = ("_event",)
    _event: Any

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self._event.wait(timeout)


class ThreadingEvent(_DelegatingEvent):
    """A stop flag for threads of one process."""

    __slots__ = ()

    def __init__(self) -> None:
        self._event = threading.Event()


class MultiprocessingEvent(_DelegatingEvent):
    """A stop flag shared with child processes (created from `ctx`, default: the default multiprocessing context)."""

    __slots__ = ()

    def __init__(self, *, ctx: Optional[Any] = None) -> None:
        self._event = (ctx or multiprocessing).Event()

    def __getstate__(self) -> Any:
        return self._event

    def __setstate__(self, state: Any) -> None:
        self._event = state
