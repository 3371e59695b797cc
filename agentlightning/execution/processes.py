"""Runner processes: started spawn-safely, supervised, replaced when they die, stopped with an escalation.

A runner process gets its bundle pickled by the parent (so an agent that cannot travel to another process is reported
before anything starts), reaches its store by URL (or receives a picklable store), signals when it is ready, and
exits with a code that says why it stopped. It stops by itself when its parent disappears, so no runner outlives a
killed trainer.

The parent supervises its children: a runner that dies while the run goes on has its in-flight attempt marked
unresponsive (so the rollout is retried at once instead of after the unresponsive timeout) and is replaced, a few
times at most. Stopping escalates in four steps: the stop flag, SIGINT, SIGTERM, SIGKILL.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Optional

from .events import ExecutionEvent
from .loop import run_interruptibly
from .reaper import release_attempts_of_process

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext
    from multiprocessing.process import BaseProcess

    from agentlightning.store.base import LightningStore

__all__ = [
    "EXIT_CONFIG_ERROR",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_ORPHANED",
    "EXIT_STORE_UNREACHABLE",
    "ChildStore",
    "ProcessGroup",
    "describe_exit",
    "join_until_deadline",
    "pickle_for_child",
    "signal_processes",
    "stop_processes",
]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG_ERROR = 2
"""The bundle could not be loaded in the child (an agent that cannot be imported there, ...), or the runner cannot
start as configured (its tracer asks to capture a framework that is not installed)."""
EXIT_STORE_UNREACHABLE = 3
EXIT_ORPHANED = 4
"""The parent process disappeared."""

_FATAL_CODES = (EXIT_CONFIG_ERROR, EXIT_STORE_UNREACHABLE)
_PARENT_CHECK = 1.0

SignalAction = Literal["interrupt", "terminate", "kill"]


def describe_exit(code: Optional[int]) -> str:
    """ "exit code 1", "signal SIGKILL", ... for log messages."""
    if code is None:
        return "no exit code (still running)"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def pickle_for_child(obj: Any, what: str) -> bytes:
    """Pickle what a child process needs, with a clear error when it cannot be sent there.

    Raises:
        TypeError: `obj` cannot be pickled, or refers to objects defined in an interactive `__main__` that a spawned
            process cannot import.
    """
    try:
        payload = pickle.dumps(obj)
    except Exception as exc:
        raise TypeError(
            f"The {what} cannot be sent to the runner processes ({type(exc).__name__}: {exc}). Runner processes are "
            "started with 'spawn': define the agent (and hooks, tracer, runner) at module level in an importable "
            "module or script, not inside a function or a lambda, or use strategy='shm' to run everything in this "
            "process."
        ) from exc
    main = sys.modules.get("__main__")
    if b"__main__" in payload and getattr(main, "__file__", None) is None:
        raise TypeError(
            f"The {what} refers to objects defined in an interactive session (__main__ has no file), which runner "
            "processes cannot import. Move the agent into a module or script, or use strategy='shm'."
        )
    return payload


@dataclass(frozen=True)
class ChildStore:
    """How a child process reaches the store: a server URL (a client is created there) or a picklable store."""

    url: Optional[str] = None
    api_key: Optional[str] = None
    payload: Optional[bytes] = None

    def open(self) -> tuple[LightningStore, bool]:
        """The store, and whether the child owns it (and must close it)."""
        if self.url is not None:
            if self.url.startswith(("http://", "https://")):
                from agentlightning.store.http.client.client import LightningStoreClient

                return LightningStoreClient(self.url, api_key=self.api_key), True
            from agentlightning.store.url import store_from_url

            return store_from_url(self.url), True
        assert self.payload is not None
        return pickle.loads(self.payload), False


def _watch_parent(parent_pid: int, stop: ExecutionEvent) -> None:
    while True:
        time.sleep(_PARENT_CHECK)
        if os.getppid() != parent_pid:
            logger.warning("The parent process %d is gone; this runner stops", parent_pid)
            stop.set()
            time.sleep(5.0)  # time to record the attempt in flight
            os._exit(EXIT_ORPHANED)


def runner_process_main(
    payload: bytes,
    worker_id: int,
    child_store: ChildStore,
    stop: ExecutionEvent,
    ready: ExecutionEvent,
    parent_pid: int,
    log_level: int,
) -> None:
    """Entry point of a runner process (module level, so 'spawn' can start it)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from agentlightning.logging import setup

    if not logging.getLogger("agentlightning").handlers:
        setup(log_level, color=False)
    threading.Thread(target=_watch_parent, args=(parent_pid, stop), name="agl-parent-watch", daemon=True).start()
    code = EXIT_OK
    try:
        try:
            bundle = pickle.loads(payload)
            store, owned = child_store.open()
        except Exception as exc:
            logger.error("runner-%d could not load what the trainer sent it: %r", worker_id, exc, exc_info=True)
            code = EXIT_CONFIG_ERROR
            return
        ready.set()
        try:
            run_interruptibly(_run_bundle(bundle, store, owned, worker_id, stop))
        except KeyboardInterrupt:
            code = EXIT_OK
        except Exception as exc:
            from agentlightning.instrumentation import InstrumentationError
            from agentlightning.runner.errors import StoreUnreachableError

            if isinstance(exc, StoreUnreachableError):
                logger.error("%s", exc)
                code = EXIT_STORE_UNREACHABLE
            elif isinstance(exc, InstrumentationError):  # what to install: one line, and no restart would help
                logger.error("runner-%d cannot start: %s", worker_id, exc)
                code = EXIT_CONFIG_ERROR
            else:
                logger.error("runner-%d stopped on an error: %r", worker_id, exc, exc_info=True)
                code = EXIT_ERROR
    except KeyboardInterrupt:
        code = EXIT_OK
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    sys.exit(code)


async def _run_bundle(bundle: Any, store: LightningStore, owned: bool, worker_id: int, stop: ExecutionEvent) -> None:
    try:
        await bundle(store, worker_id, stop)
    finally:
        if owned:
            try:
                await store.close()
            except Exception:
                logger.debug("closing the store client failed", exc_info=True)


def join_until_deadline(processes: Sequence[BaseProcess], timeout: float) -> list[BaseProcess]:
    """Wait up to `timeout` seconds for the processes to exit; the ones still alive."""
    deadline = time.monotonic() + max(0.0, timeout)
    alive = [process for process in processes if process.exitcode is None]
    while alive:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        multiprocessing.connection.wait([process.sentinel for process in alive], timeout=remaining)
        alive = [process for process in alive if process.exitcode is None]
    return alive


def signal_processes(processes: Sequence[BaseProcess], action: SignalAction) -> None:
    """Send SIGINT ("interrupt"), SIGTERM ("terminate") or SIGKILL ("kill"); errors per process are logged."""
    for process in processes:
        try:
            if action == "interrupt":
                if process.pid is not None:
                    os.kill(process.pid, signal.SIGINT)
            elif action == "terminate":
                process.terminate()
            else:
                process.kill()
        except (ProcessLookupError, OSError, ValueError) as exc:
            logger.debug("Could not %s %s: %r", action, process.name, exc)


def stop_processes(processes: Sequence[BaseProcess], *, first_wait: float, step_timeout: float) -> list[BaseProcess]:
    """Wait `first_wait` seconds for the processes to exit by themselves, then send SIGINT, SIGTERM and SIGKILL to
    the survivors, waiting `step_timeout` seconds after each. The processes still alive at the end."""
    alive = join_until_deadline(processes, first_wait)
    steps: list[SignalAction] = ["interrupt", "terminate", "kill"]
    for action in steps:
        if not alive:
            break
        logger.info(
            "%d process(es) still running (%s); sending %s", len(alive), ", ".join(p.name for p in alive), action
        )
        signal_processes(alive, action)
        alive = join_until_deadline(alive, step_timeout)
    return alive


@dataclass
class _Slot:
    worker_id: int
    process: BaseProcess
    ready: Any
    restarts: int = 0
    handled: bool = False
    signalled: bool = False  # outlived the graceful stop and was sent SIGINT (and maybe SIGTERM/SIGKILL) by shutdown
    history: list[str] = field(default_factory=list)


class ProcessGroup:
    """The runner processes of one run (see the module docstring).

    Args:
        ctx: multiprocessing context ("spawn" by default in the strategies).
        payload: the pickled runner bundle.
        child_store: how children reach the store.
        stop: the shared stop flag.
        worker_ids: one process per id.
        reaper_store: store used to release the attempts of dead runners (None: leave it to the health rules).
        max_restarts: how many times one runner is replaced after dying.
    """

    def __init__(
        self,
        ctx: BaseContext,
        payload: bytes,
        child_store: ChildStore,
        stop: ExecutionEvent,
        worker_ids: Sequence[int],
        *,
        reaper_store: Optional[LightningStore] = None,
        max_restarts: int = 3,
        allowed_exit_codes: Sequence[int] = (0, -15),
        graceful_timeout: float = 10.0,
        terminate_timeout: float = 5.0,
        interrupt_grace: float = 1.0,
    ) -> None:
        self._ctx = ctx
        self._payload = payload
        self._child_store = child_store
        self._stop = stop
        self._worker_ids = list(worker_ids)
        self._reaper_store = reaper_store
        self.max_restarts = max_restarts
        self.allowed_exit_codes = tuple(allowed_exit_codes)
        self.graceful_timeout = graceful_timeout
        self.terminate_timeout = terminate_timeout
        self.interrupt_grace = interrupt_grace
        self._slots: list[_Slot] = []
        self._closing = threading.Event()
        self._supervisor: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self.fatal: Optional[str] = None
        self.deaths: list[str] = []

    # -------------------------------------------------------------------------------------------- starting
    def set_url(self, url: str) -> None:
        """Point children started from now on at the store server `url`."""
        self._child_store = ChildStore(url=url, api_key=self._child_store.api_key)

    def _new_process(self, worker_id: int) -> tuple[BaseProcess, Any]:
        ready = self._ctx.Event()
        level = logging.getLogger("agentlightning").getEffectiveLevel()
        process = self._ctx.Process(  # type: ignore[attr-defined]
            target=runner_process_main,
            args=(self._payload, worker_id, self._child_store, self._stop, ready, os.getpid(), level),
            name=f"runner-{worker_id}",
            daemon=False,
        )
        # Children start with SIGINT ignored (inherited through exec) until their handler is installed: a Ctrl-C
        # during their start-up then prints no traceback. Only the main thread may change signal handlers.
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
        try:
            process.start()
        finally:
            if in_main:
                signal.signal(signal.SIGINT, previous)
        return process, ready

    def start(self) -> None:
        """Start one process per worker id."""
        for worker_id in self._worker_ids:
            process, ready = self._new_process(worker_id)
            self._slots.append(_Slot(worker_id, process, ready))
        logger.info("Started %d runner process(es)", len(self._slots))

    @property
    def processes(self) -> list[BaseProcess]:
        return [slot.process for slot in self._slots]

    def alive(self) -> int:
        return sum(1 for slot in self._slots if slot.process.exitcode is None)

    # ------------------------------------------------------------------------------------------ supervising
    def supervise(self, on_fatal: Callable[[str], None]) -> None:
        """Watch the children in a background thread; `on_fatal(message)` is called when the run cannot go on."""

        def loop() -> None:
            while not self._closing.is_set():
                with self._lock:
                    live = [slot.process.sentinel for slot in self._slots if slot.process.exitcode is None]
                if live:
                    multiprocessing.connection.wait(live, timeout=0.5)
                else:
                    self._closing.wait(0.5)
                if self._closing.is_set() or self._stop.is_set():
                    return
                with self._lock:
                    for slot in self._slots:
                        if slot.process.exitcode is not None and not slot.handled:
                            message = self._handle_exit(slot)
                            if message is not None and self.fatal is None:
                                self.fatal = message
                                on_fatal(message)

        self._supervisor = threading.Thread(target=loop, name="agl-runner-supervisor", daemon=True)
        self._supervisor.start()

    def _handle_exit(self, slot: _Slot) -> Optional[str]:
        """React to a child that exited while the run goes on; a fatal message when the run cannot continue."""
        process = slot.process
        code = process.exitcode
        slot.handled = True
        name = process.name
        if code == EXIT_OK:
            logger.info("%s finished on its own", name)
            return None
        if not slot.ready.is_set():
            return (
                f"{name} exited with {describe_exit(code)} before it started. If the agent is defined in the script "
                "you run, make sure the script starts training under `if __name__ == '__main__':` (runner processes "
                "are started with 'spawn' and import the script again); see the runner's error above."
            )
        if code in _FATAL_CODES:
            return f"{name} stopped with {describe_exit(code)}; see its error above"
        reason = f"runner process {name} (pid {process.pid}) died with {describe_exit(code)}"
        self.deaths.append(reason)
        logger.error("%s while the run goes on", reason)
        self._reap(process.pid, reason)
        if slot.restarts < self.max_restarts:
            slot.restarts += 1
            logger.warning("Replacing %s (restart %d of at most %d)", name, slot.restarts, self.max_restarts)
            slot.process, slot.ready = self._new_process(slot.worker_id)
            slot.handled = False
            return None
        logger.error("%s died %d times; it is not replaced again", name, slot.restarts + 1)
        if all(other.process.exitcode is not None for other in self._slots):
            return f"every runner process died; the last one: {reason}"
        return None

    def _reap(self, pid: Optional[int], reason: str) -> None:
        if self._reaper_store is None or pid is None:
            return
        try:
            released = asyncio.run(
                release_attempts_of_process(self._reaper_store, pid=pid, hostname=socket.gethostname(), reason=reason)
            )
            if released:
                logger.warning("Released the attempts of the dead runner: %s", ", ".join(released))
        except Exception as exc:
            logger.warning("Could not release the attempt of %s: %r (the store's health rules will)", reason, exc)

    # ---------------------------------------------------------------------------------------------- stopping
    def shutdown(self, *, interrupted: bool = False) -> None:
        """Stop every child: the stop flag, then SIGINT, SIGTERM and SIGKILL, each after a wait."""
        self._closing.set()
        if self._supervisor is not None:
            self._supervisor.join(5.0)
        processes = self.processes
        if not processes:
            return
        self._stop.set()
        try:
            lingering = join_until_deadline(processes, self.interrupt_grace if interrupted else self.graceful_timeout)
            for slot in self._slots:  # stopped by a signal of ours: their exit code says so, not that they failed
                slot.signalled = slot.process in lingering
            alive = stop_processes(lingering, first_wait=0.0, step_timeout=self.terminate_timeout)
        except KeyboardInterrupt:
            logger.warning("Interrupted again: killing the runner processes")
            signal_processes([p for p in processes if p.exitcode is None], "kill")
            alive = join_until_deadline(processes, 2.0)
        if alive:
            logger.error("Runner processes that could not be stopped: %s", ", ".join(p.name for p in alive))
        for slot in self._slots:  # attempts a stopped runner could not record any more (killed, claim in flight)
            if slot.ready.is_set() and slot.process.exitcode is not None:
                self._reap(slot.process.pid, f"runner process {slot.process.name} stopped before finishing the attempt")

    def serve(self) -> None:
        """Start the children and wait until they all exit (or one fails for good, or Ctrl-C); then stop them.

        Raises:
            RuntimeError: the runners cannot go on (see `fatal`), or exited with a bad code.
        """
        interrupted = False
        done = threading.Event()
        try:
            self.start()
            self.supervise(lambda message: done.set())
            while self.alive() and not done.is_set() and not self._stop.is_set():
                done.wait(0.5)
        except KeyboardInterrupt:
            interrupted = True
            logger.warning("Interrupted (Ctrl-C): stopping the runners")
        finally:
            self.shutdown(interrupted=interrupted)
        if self.fatal is not None:
            raise RuntimeError(self.fatal)
        if not interrupted:
            self.check_exit_codes()

    def check_exit_codes(self) -> None:
        """RuntimeError listing the children that exited with a code outside `allowed_exit_codes` (not already
        handled while the run went on)."""
        unexpected = [
            slot for slot in self._slots if not slot.handled and slot.process.exitcode not in self.allowed_exit_codes
        ]
        stopped = [slot.process.name for slot in unexpected if slot.signalled]
        if stopped:  # the run itself was over; these only failed to stop in time
            logger.warning(
                "Runner processes did not stop within %.0f s after the run and were stopped by signal: %s",
                self.graceful_timeout,
                ", ".join(stopped),
            )
        bad = [
            f"{slot.process.name} ({describe_exit(slot.process.exitcode)})" for slot in unexpected if not slot.signalled
        ]
        if bad:
            raise RuntimeError(f"Runner processes failed: {', '.join(bad)}")
