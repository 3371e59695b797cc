"""Runner processes: started spawn-safely, supervised (`supervisor.py`), stopped with an escalation.

`ProcessLauncher` starts one runner process per worker id (`child.runner_process_main`) and reads how it ended from
its exit code; `ProcessGroup` is the supervisor of those processes plus the way they stop: the stop flag, then SIGINT,
SIGTERM and SIGKILL, each after a wait (`signals.py`).
"""

from __future__ import annotations

import logging
import multiprocessing.connection
import os
import signal
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .child import EXIT_CONFIG_ERROR, EXIT_OK, EXIT_STORE_UNREACHABLE, ChildStore, runner_process_main
from .events import ExecutionEvent
from .signals import describe_exit, join_until_deadline, signal_processes, signals_handled_by, stop_processes
from .supervisor import Supervisor, WorkerExit

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext
    from multiprocessing.process import BaseProcess

    from agentlightning.store.base import LightningStore

__all__ = ["ProcessGroup", "ProcessLauncher", "RunnerProcess"]

logger = logging.getLogger(__name__)


@dataclass
class RunnerProcess:
    """One runner process and its readiness flag (set once its bundle and store are loaded)."""

    process: BaseProcess
    ready: Any
    signalled: bool = False
    """It outlived the graceful stop and was sent SIGINT (maybe SIGTERM/SIGKILL) by the shutdown."""


class ProcessLauncher:
    """Starts runner processes (see `supervisor.WorkerLauncher`)."""

    kind = "runner process"

    def __init__(self, ctx: BaseContext, payload: bytes, child_store: ChildStore, stop: ExecutionEvent) -> None:
        self.ctx = ctx
        self.payload = payload
        self.child_store = child_store
        self.stop = stop

    def launch(self, worker_id: int) -> RunnerProcess:
        ready = self.ctx.Event()
        level = logging.getLogger("agentlightning").getEffectiveLevel()
        process = self.ctx.Process(  # type: ignore[attr-defined]
            target=runner_process_main,
            args=(self.payload, worker_id, self.child_store, self.stop, ready, os.getpid(), level),
            name=f"runner-{worker_id}",
            daemon=False,
        )
        # Children start with SIGINT ignored (inherited through exec) until they have loaded their bundle: a Ctrl-C
        # during their start-up prints no traceback. Only the main thread may change signal handlers.
        # The previous handler is read before ignoring and put back in `finally`: a Ctrl-C already pending runs
        # its Python handler right after `signal.signal` returns, and must not leave this process ignoring SIGINT.
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGINT) if in_main else None
        try:
            if previous is not None:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            process.start()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return RunnerProcess(process, ready)

    def wait(self, handles: Sequence[RunnerProcess], timeout: float) -> None:
        multiprocessing.connection.wait([handle.process.sentinel for handle in handles], timeout=timeout)

    def exit_of(self, handle: RunnerProcess) -> Optional[WorkerExit]:
        code = handle.process.exitcode
        if code is None:
            return None
        description = describe_exit(code)
        if code == EXIT_OK:
            return WorkerExit(description, ok=True, started=handle.ready.is_set())
        if not handle.ready.is_set():
            # Killed by a signal before it started (out of memory, a kill by hand): nothing says a restart would fail
            # the same way, so it is replaced. An exit code of its own (an import error, a missing main guard) is.
            return WorkerExit(description, started=False, fatal=code > 0)
        if code == EXIT_STORE_UNREACHABLE:
            where = self.child_store.url or "its store"
            message = f"{handle.process.name} could not reach the store at {where} within its connect_timeout"
            return WorkerExit(description, fatal=True, store_unreachable=True, message=message)
        if code == EXIT_CONFIG_ERROR:
            return WorkerExit(description, fatal=True)
        return WorkerExit(description)

    def name(self, handle: RunnerProcess) -> str:
        return handle.process.name

    def location(self, handle: RunnerProcess) -> Optional[tuple[str, int]]:
        pid = handle.process.pid
        return (socket.gethostname(), pid) if pid is not None else None

    def not_started_hint(self) -> str:
        return (
            "If the agent is defined in the script you run, make sure the script starts training under "
            "`if __name__ == '__main__':` (runner processes are started with 'spawn' and import the script again); "
            "see the runner's error above."
        )


class ProcessGroup(Supervisor[RunnerProcess]):
    """The runner processes of one run: supervised while the run goes on, then stopped.

    Args:
        ctx: multiprocessing context ("spawn" by default in the strategies).
        payload: the pickled runner bundle.
        child_store: how children reach the store.
        stop: the shared stop flag.
        worker_ids: one process per id.
        reaper_store: store used to release the attempts of dead runners (None: leave it to the health rules).
        max_restarts: how many times one runner is replaced after dying.
        allowed_exit_codes: exit codes that are not failures.
        graceful_timeout: seconds the runners get to stop after the run, before SIGINT.
        terminate_timeout: seconds after each signal before the next.
        interrupt_grace: seconds the runners get after Ctrl-C, before SIGINT.
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
        self._launcher = ProcessLauncher(ctx, payload, child_store, stop)
        super().__init__(self._launcher, worker_ids, reaper_store=reaper_store, max_restarts=max_restarts)
        self._stop = stop
        self.allowed_exit_codes = tuple(allowed_exit_codes)
        self.graceful_timeout = graceful_timeout
        self.terminate_timeout = terminate_timeout
        self.interrupt_grace = interrupt_grace
        self._grace_used: Optional[tuple[float, str]] = None
        """(seconds, after what) the runners were given by the last shutdown before they were signalled."""
        self._escalated = False

    def set_url(self, url: str) -> None:
        """Point children started from now on at the store server `url`."""
        self._launcher.child_store = ChildStore(url=url, api_key=self._launcher.child_store.api_key)

    @property
    def processes(self) -> list[BaseProcess]:
        return [handle.process for handle in self.handles]

    # ---------------------------------------------------------------------------------------------- stopping
    def shutdown(self, *, interrupted: bool = False) -> None:
        """Stop every child: the stop flag, then SIGINT, SIGTERM and SIGKILL, each after a wait. Nothing is
        replaced once this starts. A further Ctrl-C or SIGTERM meanwhile kills the children at once (it raises
        nothing: a KeyboardInterrupt in the middle of the stop printed a traceback and skipped the clean-up)."""
        with signals_handled_by(self._kill_now):
            self._shutdown(interrupted)

    def _kill_now(self, signum: int) -> None:
        """A signal during the stop: SIGKILL every child still running (runs in a signal handler: takes no lock)."""
        if not self._escalated:
            self._escalated = True
            logger.warning("Interrupted again: killing the runner processes")
        signal_processes(
            [slot.handle.process for slot in list(self.slots) if slot.handle.process.exitcode is None], "kill"
        )

    def _shutdown(self, interrupted: bool) -> None:
        self.close()
        handles = self.handles
        processes = [handle.process for handle in handles]
        if not processes:
            return
        self._stop.set()
        grace = self.interrupt_grace if interrupted else self.graceful_timeout
        self._grace_used = (grace, "the interrupt" if interrupted else "the run")
        try:
            lingering = join_until_deadline(processes, grace)
            for handle in handles:  # stopped by a signal of ours: their exit code says so, not that they failed
                handle.signalled = handle.process in lingering
            alive = stop_processes(lingering, first_wait=0.0, step_timeout=self.terminate_timeout)
        except KeyboardInterrupt:
            logger.warning("Interrupted again: killing the runner processes")
            signal_processes([p for p in processes if p.exitcode is None], "kill")
            alive = join_until_deadline(processes, 2.0)
        if alive:
            logger.error("Runner processes that could not be stopped: %s", ", ".join(p.name for p in alive))
        for handle in handles:  # attempts a runner stopped by force could not record (killed, claim in flight)
            process = handle.process
            if handle.ready.is_set() and process.exitcode not in (None, EXIT_OK):
                self.release(
                    self._launcher.location(handle),
                    f"runner process {process.name} stopped ({describe_exit(process.exitcode)}) before finishing "
                    "its attempt",
                )

    def serve(self) -> bool:
        """Start the children and wait until they all exit (or one fails for good, or Ctrl-C); then stop them.
        Returns whether it was interrupted (Ctrl-C).

        Raises:
            StoreUnreachableError: a runner could not reach the store.
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
        self.raise_if_fatal()
        if not interrupted:
            self.check_exit_codes()
        return interrupted

    def raise_if_fatal(self) -> None:
        """Raise the reason the runners could not go on, if there is one.

        Raises:
            StoreUnreachableError: a runner could not reach the store.
            RuntimeError: any other reason.
        """
        if self.fatal is None:
            return
        if self.fatal_exit is not None and self.fatal_exit.store_unreachable:
            from agentlightning.runner.errors import StoreUnreachableError

            raise StoreUnreachableError(self.fatal)
        raise RuntimeError(self.fatal)

    def check_exit_codes(self) -> None:
        """Report the children that had to be stopped by signal (a warning naming each), and raise RuntimeError
        listing those that exited by themselves with a code outside `allowed_exit_codes` (and were not already
        handled while the run went on)."""
        handles = [slot.handle for slot in self.slots if not slot.handled]
        stopped = [f"{h.process.name} ({describe_exit(h.process.exitcode)})" for h in handles if h.signalled]
        if stopped:  # the run itself was over; these only failed to stop in time
            grace, after = self._grace_used or (self.graceful_timeout, "the run")
            logger.warning(
                "Runner processes did not stop within %g s after %s and were stopped by signal: %s",
                grace,
                after,
                ", ".join(stopped),
            )
        bad = [
            f"{h.process.name} ({describe_exit(h.process.exitcode)})"
            for h in handles
            if not h.signalled and h.process.exitcode not in self.allowed_exit_codes
        ]
        if bad:
            raise RuntimeError(f"Runner processes failed: {', '.join(bad)}")
