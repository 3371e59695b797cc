"""Waiting for processes and stopping them with an escalation: SIGINT, then SIGTERM, then SIGKILL.

Plain functions over `multiprocessing` processes; the strategies and the process supervisor decide when to call them.
"""

from __future__ import annotations

import logging
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, Optional

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

__all__ = [
    "SignalAction",
    "describe_exit",
    "join_until_deadline",
    "signal_processes",
    "signals_handled_by",
    "stop_processes",
]

logger = logging.getLogger(__name__)

SignalAction = Literal["interrupt", "terminate", "kill"]

_WAIT_SLICE = 3600.0
"""Longest single wait: `multiprocessing.connection.wait` cannot take an infinite timeout."""


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


def join_until_deadline(processes: Sequence[BaseProcess], timeout: Optional[float]) -> list[BaseProcess]:
    """Wait up to `timeout` seconds (None or `inf`: until they exit) for the processes to exit; the ones still
    alive."""
    deadline = time.monotonic() + max(0.0, timeout) if timeout is not None else float("inf")
    alive = [process for process in processes if process.exitcode is None]
    while alive:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        multiprocessing.connection.wait([process.sentinel for process in alive], timeout=min(remaining, _WAIT_SLICE))
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


@contextmanager
def signals_handled_by(handler: Callable[[int], None]) -> Iterator[None]:
    """Within the block, Ctrl-C (SIGINT) and SIGTERM call `handler(signum)` instead of raising; the previous handlers
    come back afterwards. Only the main thread can set handlers: elsewhere the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        handler(signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
