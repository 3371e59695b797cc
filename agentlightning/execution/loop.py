"""Running bundles on event loops: interruptible by Ctrl-C, cancellable when the stop flag is set.

`run_interruptibly` is `asyncio.run` without asyncio's own SIGINT handler: Ctrl-C raises KeyboardInterrupt in the
main thread wherever it is (also inside a blocking sync algorithm), then the coroutine is cancelled and given a
moment to clean up (runners record their interrupted attempt) before KeyboardInterrupt propagates.
`run_until_completed_or_canceled` runs a bundle and, once the stop flag is set, gives it a grace period, cancels it,
and finally abandons it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Optional, Protocol, TypeVar

from .events import ExecutionEvent

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["Supervisor", "run_interruptibly", "run_supervised", "run_until_completed_or_canceled"]

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
                logger.debug("Task %r ended with %r while shutting down", task, exc)


def run_interruptibly(coroutine: Coroutine[Any, Any, T], *, cleanup_timeout: float = 10.0) -> T:
    """Run `coroutine` on a new event loop; on KeyboardInterrupt cancel it, let it clean up, and re-raise."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        task = loop.create_task(coroutine)
        try:
            return loop.run_until_complete(task)
        except KeyboardInterrupt:
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
    while not task.done():
        if stop.is_set():
            break
        await asyncio.wait({task}, timeout=poll_interval)
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


class Supervisor(Protocol):
    """Watches the runners of a run (process group, actor pool)."""

    fatal: Optional[str]

    def supervise(self, on_fatal: Callable[[str], None]) -> None: ...


async def run_supervised(
    algorithm: Callable[[LightningStore, ExecutionEvent], Awaitable[None]],
    store: LightningStore,
    stop: ExecutionEvent,
    supervisor: Optional[Supervisor],
) -> None:
    """Run the algorithm bundle; when the supervisor reports that the runners cannot go on, cancel it and raise
    RuntimeError with the reason."""
    task = asyncio.ensure_future(algorithm(store, stop))
    if supervisor is not None:
        loop = asyncio.get_running_loop()

        def cancel(message: str) -> None:
            loop.call_soon_threadsafe(task.cancel)

        supervisor.supervise(cancel)
    try:
        await task
    except asyncio.CancelledError:
        if supervisor is not None and supervisor.fatal is not None:
            raise RuntimeError(supervisor.fatal) from None
        raise
    except BaseException:
        stop.set()
        raise
