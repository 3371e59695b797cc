"""One supervisor for the runners of a run, whatever starts them (processes, Ray actors).

A `WorkerLauncher` knows how to start one worker, how to wait for workers and how one ended (`WorkerExit`); the
`Supervisor` decides what to do about it, the same way for every kind of worker: a worker that finished by itself is
noted; one that failed before it started, or for a reason no restart fixes (an agent that cannot load, a store that
cannot be reached), stops the run; one that died while the run goes on (also one killed by a signal before it
started: an OOM kill, a kill by hand, which a restart may well survive) has its in-flight attempt released (marked
unresponsive, so the rollout is retried now rather than after the unresponsive timeout) and is replaced, a few times
at most. Once `close()` is called nothing is replaced any more, so shutting down never races with a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Optional, Protocol, TypeVar

from agentlightning.utils.io_loop import io_loop

from .reaper import release_attempts_of_process

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["Slot", "Supervisor", "WorkerExit", "WorkerLauncher"]

logger = logging.getLogger(__name__)

H = TypeVar("H")


@dataclass(frozen=True)
class WorkerExit:
    """How a worker ended."""

    description: str
    """"exit code 1", "signal SIGKILL", "RayActorError: ...": for messages."""
    ok: bool = False
    """It finished by itself, without an error."""
    started: bool = True
    """It had loaded its bundle and started running it."""
    fatal: bool = False
    """A failure that a restart would repeat (configuration, unreachable store): the run stops."""
    store_unreachable: bool = False
    """The worker could not reach its store."""
    message: Optional[str] = None
    """The whole message for a fatal end, when the launcher can say more than the description."""


class WorkerLauncher(Protocol[H]):
    """Starts workers of one kind and tells how they ended."""

    kind: str
    """ "runner process", "runner actor": for messages."""

    def launch(self, worker_id: int) -> H:
        """Start worker `worker_id` (returns at once; the worker starts in the background)."""
        ...

    def wait(self, handles: Sequence[H], timeout: float) -> None:
        """Block until one of `handles` ended, or `timeout` seconds passed."""
        ...

    def exit_of(self, handle: H) -> Optional[WorkerExit]:
        """How the worker ended; None while it runs."""
        ...

    def name(self, handle: H) -> str: ...

    def location(self, handle: H) -> Optional[tuple[str, int]]:
        """(hostname, pid) of the worker, which its heartbeats report; None if unknown."""
        ...

    def not_started_hint(self) -> str:
        """What to check when a worker exits before it started (appended to the message)."""
        ...


@dataclass
class Slot(Generic[H]):
    """One worker id and its current worker."""

    worker_id: int
    handle: H
    restarts: int = 0
    handled: bool = False
    """Its exit was dealt with (reported, released, replaced or not)."""
    history: list[str] = field(default_factory=list)


class Supervisor(Generic[H]):
    """Starts the workers, watches them in a background thread, replaces the dead (see the module docstring).

    Args:
        launcher: starts the workers.
        worker_ids: one worker per id.
        reaper_store: store used to release the attempts of dead workers (None: leave it to the health rules).
        max_restarts: how many times one worker is replaced after dying.
        poll_interval: longest wait of the watch thread between checks.
    """

    def __init__(
        self,
        launcher: WorkerLauncher[H],
        worker_ids: Sequence[int],
        *,
        reaper_store: Optional[LightningStore] = None,
        max_restarts: int = 3,
        poll_interval: float = 0.5,
    ) -> None:
        self.launcher = launcher
        self._worker_ids = list(worker_ids)
        self.reaper_store = reaper_store
        self.max_restarts = max_restarts
        self.poll_interval = poll_interval
        self.slots: list[Slot[H]] = []
        self.fatal: Optional[str] = None
        """Why the run cannot go on (set once)."""
        self.fatal_exit: Optional[WorkerExit] = None
        self.deaths: list[str] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -------------------------------------------------------------------------------------------- starting
    def start(self) -> None:
        """Start one worker per id (in the background: `check` reports those that cannot start)."""
        with self._lock:
            for worker_id in self._worker_ids:
                self.slots.append(Slot(worker_id, self.launcher.launch(worker_id)))
        logger.info("Started %d %s(es)", len(self.slots), self.launcher.kind)

    @property
    def handles(self) -> list[H]:
        with self._lock:
            return [slot.handle for slot in self.slots]

    def alive(self) -> int:
        return sum(1 for handle in self.handles if self.launcher.exit_of(handle) is None)

    # ------------------------------------------------------------------------------------------ supervising
    def supervise(self, on_fatal: Callable[[str], None]) -> None:
        """Watch the workers in a background thread; `on_fatal(message)` is called once when the run cannot go on."""

        def loop() -> None:
            while not self._closing.is_set():
                live = [handle for handle in self.handles if self.launcher.exit_of(handle) is None]
                if live:
                    self.launcher.wait(live, self.poll_interval)
                else:
                    self._closing.wait(self.poll_interval)
                message = self.check()
                if message is not None:
                    on_fatal(message)
                    return

        self._thread = threading.Thread(target=loop, name=f"agl-{self.launcher.kind.replace(' ', '-')}-supervisor")
        self._thread.daemon = True
        self._thread.start()

    def check(self) -> Optional[str]:
        """Deal with the workers that ended since the last check; the fatal message when the run cannot go on (only
        the first time). Does nothing once closing."""
        with self._lock:
            if self._closing.is_set() or self.fatal is not None:
                return None
            for slot in list(self.slots):
                if slot.handled:
                    continue
                ended = self.launcher.exit_of(slot.handle)
                if ended is None:
                    continue
                message = self._handle_exit(slot, ended)
                if message is not None:
                    self.fatal, self.fatal_exit = message, ended
                    return message
        return None

    def _handle_exit(self, slot: Slot[H], ended: WorkerExit) -> Optional[str]:
        """React to a worker that ended while the run goes on (under the lock); a fatal message when the run cannot
        continue."""
        slot.handled = True
        name = self.launcher.name(slot.handle)
        if ended.ok:
            logger.info("%s finished on its own", name)
            return None
        if ended.fatal and ended.message is not None:
            return ended.message
        if not ended.started and ended.fatal:
            return f"{name} exited with {ended.description} before it started. {self.launcher.not_started_hint()}"
        if ended.fatal:
            return f"{name} stopped with {ended.description}; see its error above"
        died = f"died with {ended.description}" + ("" if ended.started else " before it started")
        reason = f"{self.launcher.kind} {name} {died}"
        location = self.launcher.location(slot.handle)
        if location is not None:
            reason = f"{self.launcher.kind} {name} (pid {location[1]}) {died}"
        self.deaths.append(reason)
        slot.history.append(reason)
        logger.error("%s while the run goes on", reason)
        self.release(location, reason)
        if slot.restarts < self.max_restarts:
            slot.restarts += 1
            logger.warning("Replacing %s (restart %d of at most %d)", name, slot.restarts, self.max_restarts)
            slot.handle = self.launcher.launch(slot.worker_id)
            slot.handled = False
            return None
        logger.error("%s died %d times; it is not replaced again", name, slot.restarts + 1)
        if all(self.launcher.exit_of(other.handle) is not None for other in self.slots):
            return f"every {self.launcher.kind} died; the last one: {reason}"
        return None

    def release(self, location: Optional[tuple[str, int]], reason: str) -> None:
        """Mark the in-flight attempts of the worker at `location` unresponsive, so their rollouts are retried now."""
        if self.reaper_store is None or location is None:
            return
        hostname, pid = location
        try:
            released = io_loop().run(
                release_attempts_of_process(self.reaper_store, pid=pid, hostname=hostname, reason=reason)
            )
        except Exception as exc:
            logger.warning(
                "Could not mark the attempts of %s unresponsive (%r); the store's health rules will release them",
                reason,
                exc,
            )
            return
        if released:
            logger.warning("Released the attempts of %s: %s", reason, ", ".join(released))

    # ---------------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Stop watching: from now on no worker is replaced (waits for a check in progress to finish)."""
        with self._lock:
            self._closing.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    @property
    def closing(self) -> bool:
        return self._closing.is_set()
