"""The process's I/O event loop: one daemon thread whose asyncio loop runs the background I/O of the process.

Background work that talks to stores and servers (the span writer's requests, runner heartbeats, the progress
monitor's reads, PostgreSQL's LISTEN connection) runs on this one loop instead of each on an event loop and thread
of its own, so one loop holds their connections. Code on any other thread reaches it through a portal:

- `IOLoop.run(coro)` blocks the calling thread until the coroutine finished on the I/O loop (a synchronous agent,
  the span writer's thread); called on the I/O loop itself it raises instead of deadlocking;
- `await IOLoop.run_async(coro)` from a coroutine on another loop waits without blocking that loop;
- `IOLoop.submit(coro)` starts it and returns a `concurrent.futures.Future` (cancelling it cancels the coroutine).

What runs here is detached from trace contexts (`detached_from_traces`): a request it makes is never recorded as
part of a rollout that happens to be open in the process. The loop starts on first use (`io_loop()`) and lives as long
as the process; a child made by fork() starts its own on first use (the parent's thread does not exist there). At
exit its async generators are finalised (which closes the HTTP sessions opened on it), after the span writers' last
flush (atexit runs the handlers registered later first: `agentlightning.tracer.writer` imports this module).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, Optional, TypeVar

from .untraced import CURRENT_SCOPE, DETACHED

__all__ = ["IOLoop", "io_loop"]

T = TypeVar("T")

_lock = threading.Lock()
_current: Optional[IOLoop] = None


class IOLoop:
    """An asyncio loop running forever on a daemon thread, with a blocking portal into it (see the module
    docstring). Use the process's own through `io_loop()`; constructing one starts another thread."""

    def __init__(self, name: str = "agl-io") -> None:
        self.pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        started = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.call_soon(started.set)
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name=name, daemon=True)
        self._thread.start()
        started.wait()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop itself (for `call_soon_threadsafe`)."""
        return self._loop

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def in_loop(self) -> bool:
        """Whether the caller runs on the I/O loop's thread."""
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the I/O loop, detached from trace contexts; its future (thread-safe; cancelling it cancels
        the coroutine)."""
        context = contextvars.Context()
        context.run(CURRENT_SCOPE.set, DETACHED)
        # call_soon_threadsafe copies the caller's context into the task: run it from the detached one instead
        return context.run(asyncio.run_coroutine_threadsafe, coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: Optional[float] = None) -> T:
        """Run `coro` on the I/O loop and block until it finished (its result or its exception). After `timeout`
        seconds it is cancelled and `TimeoutError` raised. Raises RuntimeError on the I/O loop's own thread, where
        waiting would deadlock."""
        if self.in_loop():
            coro.close()
            raise RuntimeError("IOLoop.run was called on the I/O loop itself: await the coroutine instead")
        future = self.submit(coro)
        try:
            done, _ = concurrent.futures.wait([future], timeout)
        except BaseException:
            future.cancel()  # KeyboardInterrupt in the waiting thread: the coroutine does not outlive the wait
            raise
        if not done:
            future.cancel()
            raise TimeoutError(f"the I/O loop did not finish the call within {timeout} s")
        return future.result()  # its result, or what it raised (a TimeoutError of its own included)

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the I/O loop from a coroutine on any loop (on the I/O loop itself: awaited directly).
        Cancelling the caller cancels the coroutine."""
        if self.in_loop():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))


def io_loop() -> IOLoop:
    """The process's I/O loop, started on first use (and again in a child process after fork())."""
    global _current
    current = _current
    if current is not None and current.pid == os.getpid():
        return current
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = IOLoop()
        return _current


def _finalise_at_exit() -> None:
    current = _current
    if current is None or current.pid != os.getpid() or not current.thread.is_alive():
        return
    try:
        current.run(current.loop.shutdown_asyncgens(), timeout=2.0)
    except Exception:  # exiting anyway: an unclosed session is only a warning
        pass


atexit.register(_finalise_at_exit)
