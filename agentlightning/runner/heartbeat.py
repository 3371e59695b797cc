"""Worker and attempt heartbeats, sent on a timer beside the runner loop (never per store call).

Every `interval` seconds (with jitter) the runner reports itself with `update_worker(worker_id, system_snapshot())`
and, while an attempt runs, `update_attempt(..., last_heartbeat_time=...)` so the store does not consider the
attempt unresponsive. The heartbeat time is sent on the store's clock (estimated from the claim), so runners on
machines with a skewed clock are not marked unresponsive. If the store answers that the attempt timed out, the
runner is told to stop the agent.

When the runner stops, a last worker heartbeat carries `stopped_at` (the time it stopped) in its stats, so progress
displays and the dashboard show the worker as stopped instead of alive and idle until its heartbeat grows stale.

Launch modes: "thread" (a task on the process's I/O loop, `agentlightning.utils.io_loop`, which runs on a thread of
its own: heartbeats continue even when an async agent blocks the runner's loop) or "asyncio" (a task on the runner's
loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional

from agentlightning.utils.io_loop import io_loop
from agentlightning.utils.system_snapshot import system_snapshot

from .timing import jittered

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["STOPPED_AT", "Heartbeat", "HeartbeatLaunchMode", "RunningAttempt", "has_stopped", "launch_mode_for"]

logger = logging.getLogger(__name__)

HeartbeatLaunchMode = Literal["thread", "asyncio"]

STOPPED_AT = "stopped_at"
"""Key of the worker's heartbeat stats that says when its runner stopped (absent while it runs)."""


def has_stopped(heartbeat_stats: Optional[Mapping[str, Any]]) -> bool:
    """Whether a worker's last heartbeat said that its runner stopped."""
    return bool(heartbeat_stats) and heartbeat_stats.get(STOPPED_AT) is not None  # type: ignore[union-attr]


def launch_mode_for(store: LightningStore, requested: HeartbeatLaunchMode) -> HeartbeatLaunchMode:
    """`requested`, except that a store that is not thread-safe gets its heartbeats on the runner's own loop."""
    if requested == "thread" and not store.capabilities.get("thread_safe", False):
        logger.warning("%s is not thread-safe; heartbeats run on the runner's event loop", type(store))
        return "asyncio"
    return requested


@dataclass
class RunningAttempt:
    """The attempt a runner is working on, as its heartbeat sees it."""

    rollout_id: str
    attempt_id: str
    abort: asyncio.Future[None]
    """Resolved (on the runner's loop) when the store declared the attempt timed out."""
    loop: asyncio.AbstractEventLoop
    agent_error: Optional[BaseException] = None
    """What the agent's own code raised (the runner records such a failure as the agent's, `error_source`)."""


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Heartbeat:
    """Periodic heartbeats of one runner worker (see the module docstring)."""

    def __init__(
        self,
        store: LightningStore,
        worker_id: str,
        *,
        interval: float,
        jitter: float,
        mode: HeartbeatLaunchMode,
        include_gpu: bool = False,
    ) -> None:
        if mode not in ("thread", "asyncio"):
            raise ValueError(f"heartbeat_launch_mode must be 'thread' or 'asyncio', got {mode!r}")
        if interval <= 0:
            raise ValueError(f"heartbeat_interval must be positive, got {interval!r}")
        self.store = store
        self.worker_id = worker_id
        self.interval = interval
        self.jitter = jitter
        self.mode: HeartbeatLaunchMode = mode
        self.include_gpu = include_gpu
        self.current: Optional[RunningAttempt] = None
        self.clock_offset = 0.0
        """Estimated store clock minus local clock."""
        self._stop = threading.Event()
        self._wake: Optional[asyncio.Event] = None  # set on the I/O loop when stopping: ends the wait between beats
        self._on_io_loop: Optional[tuple[asyncio.AbstractEventLoop, concurrent.futures.Future[None]]] = None
        self._task: Optional[asyncio.Task[None]] = None
        self._failing = False

    # ------------------------------------------------------------------------------------------------ beats
    async def beat_worker(self) -> None:
        """Report this worker with a system snapshot (raises on store errors)."""
        await self.store.update_worker(self.worker_id, heartbeat_stats=system_snapshot(self.include_gpu))

    async def beat_stopped(self) -> None:
        """Report that this worker's runner stopped (its last heartbeat; raises on store errors)."""
        stats = {**system_snapshot(self.include_gpu), STOPPED_AT: time.time()}
        await self.store.update_worker(self.worker_id, heartbeat_stats=stats)

    async def beat_attempt(self) -> None:
        """Report that the current attempt is alive; stop the agent when the store says it timed out."""
        running = self.current
        if running is None:
            return
        attempt = await self.store.update_attempt(
            running.rollout_id, running.attempt_id, last_heartbeat_time=time.time() + self.clock_offset
        )
        if attempt.status == "timeout" and self.current is running and not running.abort.done():
            logger.warning(
                "The store marked rollout %s attempt %s as timed out; stopping the agent",
                running.rollout_id,
                running.attempt_id,
            )
            running.loop.call_soon_threadsafe(_resolve, running.abort)

    async def _beat(self) -> None:
        try:
            await self.beat_attempt()
            await self.beat_worker()
        except Exception as exc:
            if not self._failing:
                logger.warning("Heartbeat of %s failed (will keep trying): %r", self.worker_id, exc)
            self._failing = True
        else:
            if self._failing:
                logger.info("Heartbeats of %s reach the store again", self.worker_id)
            self._failing = False

    # --------------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start beating (on the process's I/O loop, or as a task of the running loop)."""
        self._stop.clear()
        if self.mode == "thread":
            self._wake = asyncio.Event()  # binds to the I/O loop on its first wait there
            io = io_loop()
            self._on_io_loop = (io.loop, io.submit(self._beats(self._wake)))
        else:  # never woken: stop() cancels the task
            self._task = asyncio.get_running_loop().create_task(self._beats(asyncio.Event()))

    async def stop(self) -> None:
        """Stop beating and wait for the beat in flight (a few seconds at most)."""
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._on_io_loop is not None:
            (loop, running), self._on_io_loop = self._on_io_loop, None
            wake, self._wake = self._wake, None
            if wake is not None:
                loop.call_soon_threadsafe(wake.set)
            try:
                await asyncio.wait_for(asyncio.wrap_future(running), 5.0)
            except asyncio.TimeoutError:  # a beat stuck on an unresponsive store: wait_for cancelled it
                pass
            except Exception:  # pragma: no cover - _beats logs its own failures
                pass

    async def _beats(self, wake: asyncio.Event) -> None:
        """Beat every `interval` seconds (with jitter) until stopped; `wake` ends the wait between beats at once."""
        try:
            while not self._stop.is_set():
                try:
                    await asyncio.wait_for(wake.wait(), jittered(self.interval, self.jitter))
                except asyncio.TimeoutError:
                    pass
                if self._stop.is_set():
                    return
                await self._beat()
        except Exception:  # never let the heartbeats end with an unlogged error
            logger.exception("Heartbeats of %s stopped", self.worker_id)
