"""Running bundles on event loops: interruptible by Ctrl-C, cancellable when the stop flag is set.

`run_interruptibly` is `asyncio.run` without asyncio's own SIGINT handler: Ctrl-C raises KeyboardInterrupt in the
main thread wherever it is (also inside a blocking sync algorithm), then the coroutine is cancelled and given a
moment to clean up (runners record their interrupted attempt) before KeyboardInterrupt propagates. Python raises
KeyboardInterrupt wherever the main thread happens to be, including inside a weakref callback or `__del__`, where
it is printed as "Exception ignored" and lost; `_InterruptWatch` remembers the Ctrl-C, keeps that noise off the
terminal and raises it again from the event loop, so a swallowed Ctrl-C still stops the run. One place it is not
raised at once: inside the store's own code (`agentlightning.store`), where an exception between two statements can
leave a transaction lock held (every later store call, the server thread's included, would then wait forever). A
Ctrl-C that lands there is raised a moment later, from the event loop between callbacks (where no transaction is
open) or by delivering it again once the store code has returned; after `_GUARD_LIMIT` seconds it is raised
wherever it lands.
`run_until_completed_or_canceled` runs a bundle and, once the stop flag is set, gives it a grace period, cancels it,
and finally abandons it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
import time
import types
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Optional, Protocol, TypeVar

from .events import ExecutionEvent

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["RunnersFailed", "Supervisor", "run_interruptibly", "run_supervised", "run_until_completed_or_canceled"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _cancel_all(loop: asyncio.AbstractEventLoop, timeout: float) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    try:
        loop.run_until_complete(asyncio.wait(tasks, timeout=timeout))
    except (KeyboardInterrupt, RuntimeError):
        pass
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if not isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
                logger.error("%s raised while it was torn down: %r", task.get_name(), exc, exc_info=exc)


_GUARDED_MODULES = ("agentlightning.store.",)
"""Code a Ctrl-C must not interrupt midway (see the module docstring)."""

_GUARD_LIMIT = 2.0
"""Seconds a Ctrl-C waits for guarded code to return before it is raised wherever it lands."""


def _in_guarded_code(frame: Optional[types.FrameType]) -> bool:
    """Whether the interrupted main thread is running store code (any frame of its stack in a guarded module)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(_GUARDED_MODULES):
            return True
        frame = frame.f_back
    return False


class _InterruptWatch:
    """While installed (main thread, default SIGINT handler only), a Ctrl-C is remembered as well as raised; a
    callback on the loop raises it again until it reaches `run_interruptibly`, should the first one be swallowed."""

    recheck_interval = 0.1

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.pending = False
        self._first_at = 0.0
        self._installed = False
        self._timer: Optional[asyncio.TimerHandle] = None
        self._previous_hook: Optional[Callable[[Any], Any]] = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return  # the user's (or a parent strategy's) own handling wins
        signal.signal(signal.SIGINT, self._on_sigint)
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._on_unraisable
        self._installed = True
        self._timer = self._loop.call_later(self.recheck_interval, self._recheck)

    def _on_sigint(self, signum: int, frame: Optional[types.FrameType]) -> None:
        now = time.monotonic()
        if not self.pending:
            self.pending = True
            self._first_at = now
        if now - self._first_at < _GUARD_LIMIT and _in_guarded_code(frame):
            # Raised by `_recheck` from the loop, or by this handler again once the store code has returned (a loop
            # that does not run: a sync algorithm).
            timer = threading.Timer(self.recheck_interval, self._deliver_again)
            timer.daemon = True
            timer.start()
            return
        raise KeyboardInterrupt

    def _deliver_again(self) -> None:
        if self.pending and self._installed:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    def _on_unraisable(self, unraisable: Any) -> None:
        if self.pending and isinstance(unraisable.exc_value, KeyboardInterrupt):
            logger.debug("A Ctrl-C landed in %r and was swallowed there; it will be raised again", unraisable.object)
            return
        hook = self._previous_hook or sys.__unraisablehook__
        hook(unraisable)

    def _recheck(self) -> None:
        if self.pending:
            logger.debug("A Ctrl-C was swallowed where it landed; raising it again")
            raise KeyboardInterrupt
        self._timer = self._loop.call_later(self.recheck_interval, self._recheck)

    def handled(self) -> None:
        """The KeyboardInterrupt reached its handler: stop re-raising (cleanup runs on the same loop)."""
        self.pending = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def uninstall(self) -> None:
        self.handled()
        if self._installed and signal.getsignal(signal.SIGINT) == self._on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if self._installed and sys.unraisablehook == self._on_unraisable:
            sys.unraisablehook = self._previous_hook or sys.__unraisablehook__
        self._installed = False


def run_interruptibly(coroutine: Coroutine[Any, Any, T], *, cleanup_timeout: float = 10.0) -> T:
    """Run `coroutine` on a new event loop; on KeyboardInterrupt cancel it, let it clean up, and re-raise."""
    loop = asyncio.new_event_loop()
    watch = _InterruptWatch(loop)
    try:
        asyncio.set_event_loop(loop)
        task = loop.create_task(coroutine)
        watch.install()
        try:
            result = loop.run_until_complete(task)
            if watch.pending:
                raise KeyboardInterrupt  # swallowed, and the coroutine finished before the re-check came
            return result
        except KeyboardInterrupt:
            watch.handled()
            if not task.done():
                task.cancel()
                try:
                    loop.run_until_complete(asyncio.wait({task}, timeout=cleanup_timeout))
                except KeyboardInterrupt:
                    pass
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: no "exception was never retrieved" noise
            raise
    finally:
        watch.uninstall()
        try:
            _cancel_all(loop, cleanup_timeout)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        except (KeyboardInterrupt, RuntimeError):
            pass
        finally:
            asyncio.set_event_loop(None)
            loop.close()


async def run_until_completed_or_canceled(
    bundle: Awaitable[T],
    stop: ExecutionEvent,
    *,
    graceful_delay: float = 5.0,
    poll_interval: float = 0.05,
    name: str = "bundle",
) -> Optional[T]:
    """Run `bundle`; once `stop` is set, wait `graceful_delay`, cancel it, wait again, then abandon it.

    Returns the bundle's result (None when it was cancelled or abandoned); re-raises its own exception.
    """
    task = asyncio.ensure_future(bundle)
    task.set_name(name)
    try:
        while not task.done():
            if stop.is_set():
                break
            await asyncio.wait({task}, timeout=poll_interval)
    except asyncio.CancelledError:
        _retrieve(task)
        raise
    if task.done():
        return task.result()
    done, _ = await asyncio.wait({task}, timeout=graceful_delay)
    if done:
        logger.debug("%s finished by itself during the grace period", name)
        return task.result()
    logger.info("%s: graceful delay elapsed; canceling it", name)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=graceful_delay)
    if not done:
        logger.warning("%s did not stop after cancellation; abandoning it", name)
        return None
    if task.cancelled():
        return None
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a finished task's exception as seen (a KeyboardInterrupt it raised already went up the stack), so asyncio
    does not print it again as "exception was never retrieved"."""
    if task.done() and not task.cancelled():
        task.exception()


class RunnersFailed(BaseException):
    """Raised into an algorithm that blocks its event loop (a synchronous `run`) when the runners cannot go on.

    A BaseException, like a cancellation, so that the algorithm's own `except Exception` does not swallow it."""


def _raise_in_thread(thread_id: int, exc_type: type[BaseException]) -> bool:
    """Raise `exc_type` in thread `thread_id` at its next Python instruction (CPython's asynchronous exceptions)."""
    import ctypes

    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))
    return done == 1


class Supervisor(Protocol):
    """Watches the runners of a run (process group, actor pool)."""

    fatal: Optional[str]

    def supervise(self, on_fatal: Callable[[str], None]) -> None: ...


async def run_supervised(
    algorithm: Callable[[LightningStore, ExecutionEvent], Awaitable[None]],
    store: LightningStore,
    stop: ExecutionEvent,
    supervisor: Optional[Supervisor],
    *,
    blocked_grace: float = 2.0,
) -> None:
    """Run the algorithm bundle; when the supervisor reports that the runners cannot go on, stop it and raise
    RuntimeError with the reason.

    Stopping sets the stop flag and cancels the algorithm's task. A synchronous algorithm blocks the event loop, so
    the cancellation never runs: if the loop has not run it within `blocked_grace` seconds, `RunnersFailed` is raised
    inside the algorithm instead.
    """
    task = asyncio.ensure_future(algorithm(store, stop))
    if supervisor is not None:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()

        def on_fatal(message: str) -> None:
            stop.set()
            cancelled = threading.Event()

            def cancel() -> None:
                cancelled.set()
                task.cancel()

            try:
                loop.call_soon_threadsafe(cancel)
            except RuntimeError:  # the loop is closed: the algorithm is over already
                return
            if not cancelled.wait(blocked_grace) and not task.done():
                logger.error(
                    "The runners cannot go on (%s); stopping the algorithm, which blocks its event loop", message
                )
                _raise_in_thread(loop_thread, RunnersFailed)

        supervisor.supervise(on_fatal)
    try:
        await task
    except (asyncio.CancelledError, RunnersFailed):
        _retrieve(task)
        if supervisor is not None and supervisor.fatal is not None:
            raise RuntimeError(supervisor.fatal) from None
        raise
    except BaseException:
        _retrieve(task)
        stop.set()
        raise
