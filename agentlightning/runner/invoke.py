"""Running one agent call so that a misbehaving agent cannot take the runner down.

Async agents run as a task of the runner's loop (or, for the runner threads of the "shm" strategy, of the process's
shared agent loop: `agent_loop.py`); sync agents run on a worker thread, so the loop (and asyncio heartbeats) keep
going while they work. A call that outlives its timeout (or that the store declared timed out) is cancelled (async)
or abandoned (sync: its thread is asked to stop with an asynchronous exception, which interrupts Python code but not
a blocking C call, and a fresh thread serves the next rollout).

Whatever the agent raises is the agent's failure, never the runner's: `sys.exit` becomes `AgentExit`, and a
BaseException that is not an Exception (KeyboardInterrupt, CancelledError, GreenletExit, pytest's Failed, a class of
the user's own) becomes `AgentBaseException`, so it fails the attempt and the runner goes on. Only a cancellation of
the runner itself (its task cancelled, Ctrl-C reaching its loop) stops the runner.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import ctypes
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Optional

from .agent_loop import agent_loop
from .results import AgentBaseException, AgentExit, AgentTimeout, StoreDeclaredTimeout

__all__ = ["AgentInvoker"]

logger = logging.getLogger(__name__)


def _raise_in_thread(thread: threading.Thread, exc_type: type[BaseException]) -> bool:
    """Ask `thread` to raise `exc_type` at its next Python instruction (best effort). True if the request was made."""
    ident = thread.ident
    if ident is None or not thread.is_alive():
        return False
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc_type))
    if done > 1:  # should not happen; undo to be safe
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)
        return False
    return done == 1


class _AbandonedCall(BaseException):
    """Raised inside an abandoned sync agent to make it unwind (a BaseException so `except Exception` passes it)."""


class _AsyncCall:
    """An async agent call running as a task on `loop` (None: the caller's loop), watched from the caller's loop.

    `finished` (a future of the caller's loop) resolves when the task has ended, whatever the outcome. A CancelledError
    that the runner did not ask for (`cancel`) is the agent's own and is reported as its failure.
    """

    def __init__(self, fn: Callable[[], Awaitable[Any]], loop: Optional[asyncio.AbstractEventLoop]) -> None:
        self._fn = fn
        self._caller = asyncio.get_running_loop()
        self._loop = loop if loop is not None else self._caller
        self._task: Optional[asyncio.Task[Any]] = None
        self._cancel_requested = False
        self.finished: asyncio.Future[None] = self._caller.create_future()
        if self._loop is self._caller:
            self._start()
        else:  # the task inherits the caller's context (trace context, current rollout) through the handle
            self._loop.call_soon_threadsafe(self._start, context=contextvars.copy_context())

    async def _guarded(self) -> Any:
        try:
            return await self._fn()
        except SystemExit as exc:
            raise AgentExit(exc.code) from None
        except asyncio.CancelledError as exc:
            if self._cancel_requested:
                raise
            raise AgentBaseException(exc) from None
        except Exception:
            raise
        except BaseException as exc:  # KeyboardInterrupt would otherwise escape through the event loop
            raise AgentBaseException(exc) from None

    def _start(self) -> None:  # on the agent's loop
        self._task = self._loop.create_task(self._guarded())
        self._task.add_done_callback(self._relay)

    def _relay(self, _: asyncio.Task[Any]) -> None:  # on the agent's loop
        if self._loop is self._caller:
            self._settle()
            return
        try:
            self._caller.call_soon_threadsafe(self._settle)
        except RuntimeError:  # the caller's loop is closed: nobody waits for this call any more
            pass

    def _settle(self) -> None:  # on the caller's loop
        if not self.finished.done():
            self.finished.set_result(None)

    def cancel(self) -> None:
        """Ask the agent to stop (it gets a CancelledError at its next await)."""
        if self._loop is self._caller:
            self._cancel_here()
            return
        try:
            self._loop.call_soon_threadsafe(self._cancel_here)
        except RuntimeError:  # the agent loop is gone, and the call with it
            pass

    def _cancel_here(self) -> None:  # on the agent's loop, after `_start` (callbacks run in order)
        self._cancel_requested = True
        if self._task is not None:
            self._task.cancel()

    def result(self) -> Any:
        """The agent's return value once `finished`; raises what the agent raised."""
        task = self._task
        assert task is not None and task.done()
        if task.cancelled():  # cancelled before it started running: not by the runner, which is still waiting
            raise AgentBaseException(asyncio.CancelledError())
        return task.result()


class _SyncWorker:
    """One daemon thread that runs sync agent calls one at a time."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Optional[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]] = (
            queue.SimpleQueue()
        )
        self._closed = False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue.put((future, fn))
        return future

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)

    def _loop(self) -> None:
        while True:
            try:
                if not self._serve_next():
                    return
            except _AbandonedCall:
                # The stop request landed just after the call finished (between calls): nothing left to unwind.
                # An abandoned worker is always closed, so it ends here rather than waiting on its queue forever.
                if self._closed:
                    return

    def _serve_next(self) -> bool:
        """Run the next queued call; False once the worker was closed."""
        item = self._queue.get()
        if item is None:
            return False
        future, fn = item
        if not future.set_running_or_notify_cancel():
            return True
        try:
            result = fn()
        except _AbandonedCall:
            return True
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        return True


class AgentInvoker:
    """Runs agent calls for one runner (see the module docstring).

    Args:
        name: prefix of the worker thread's name.
        cancel_grace: seconds a cancelled async agent gets to unwind before it is abandoned.
    """

    def __init__(self, name: str = "agl-agent", *, cancel_grace: float = 5.0) -> None:
        self._name = name
        self._cancel_grace = cancel_grace
        self._worker: Optional[_SyncWorker] = None

    def close(self) -> None:
        """Release the worker thread (a call still running on it finishes in the background)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    async def call(
        self,
        fn: Callable[[], Any],
        *,
        is_async: bool,
        timeout: Optional[float] = None,
        abort: Optional[asyncio.Future[None]] = None,
    ) -> Any:
        """Run `fn()` (a coroutine function when `is_async`) and return its result.

        Raises:
            AgentTimeout: `timeout` seconds passed first.
            StoreDeclaredTimeout: `abort` was resolved first (the store declared the attempt timed out).
            AgentExit: the agent raised SystemExit.
            Exception: whatever the agent raised.
        """
        if is_async:
            return await self._call_async(fn, timeout, abort)
        return await self._call_sync(fn, timeout, abort)

    async def _wait(
        self, future: asyncio.Future[Any], timeout: Optional[float], abort: Optional[asyncio.Future[None]]
    ) -> Optional[BaseException]:
        """Wait for `future`; the reason to give up (timeout or abort), or None when it finished."""
        if timeout is None and abort is None:
            await asyncio.wait({future})
            return None
        waiters: set[asyncio.Future[Any]] = {future}
        if abort is not None:
            waiters.add(abort)
        done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if future in done:
            return None
        if abort is not None and abort.done():
            return StoreDeclaredTimeout()
        return AgentTimeout(timeout if timeout is not None else 0.0)

    async def _call_async(
        self, fn: Callable[[], Awaitable[Any]], timeout: Optional[float], abort: Optional[asyncio.Future[None]]
    ) -> Any:
        call = _AsyncCall(fn, agent_loop())
        try:
            reason = await self._wait(call.finished, timeout, abort)
        except BaseException:
            call.cancel()  # the runner is being stopped: stop the agent too
            raise
        if reason is None:
            return call.result()
        call.cancel()
        done, _ = await asyncio.wait({call.finished}, timeout=self._cancel_grace)
        if not done:
            logger.error(
                "The agent did not stop within %.1f s of being cancelled (%s); it is abandoned and may keep using "
                "its event loop",
                self._cancel_grace,
                reason,
            )
        raise reason

    async def _call_sync(
        self, fn: Callable[[], Any], timeout: Optional[float], abort: Optional[asyncio.Future[None]]
    ) -> Any:
        def guarded() -> Any:
            try:
                return fn()
            except SystemExit as exc:
                raise AgentExit(exc.code) from None
            except (Exception, _AbandonedCall):
                raise
            except BaseException as exc:
                raise AgentBaseException(exc) from None

        if self._worker is None:
            self._worker = _SyncWorker(f"{self._name}-worker")
        worker = self._worker
        context = contextvars.copy_context()
        future = asyncio.wrap_future(worker.submit(lambda: context.run(guarded)))
        try:
            reason = await self._wait(future, timeout, abort)
        except BaseException:
            self._abandon(worker, future, "the runner was stopped")
            raise
        if reason is None:
            return future.result()
        self._abandon(worker, future, str(reason))
        raise reason

    def _abandon(self, worker: _SyncWorker, future: asyncio.Future[Any], why: str) -> None:
        """Give up on the call running on `worker`: ask it to stop and serve the next calls from a new thread."""
        future.cancel()
        if self._worker is worker:
            self._worker = None
        worker.close()
        if _raise_in_thread(worker.thread, _AbandonedCall):
            logger.warning("Abandoned a sync agent call (%s); asked its thread to stop", why)
