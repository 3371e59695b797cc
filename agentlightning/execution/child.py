"""What crosses into a runner process, and the process's entry point.

The parent pickles the runner bundle itself (`pickle_for_child`), so an agent that cannot travel to another process is
reported before anything starts. The child reaches its store by URL (or unpickles a picklable store), signals when
it is ready, runs the bundle, and exits with a code that says why it stopped (`EXIT_*`). It stops by itself when its
parent disappears, so no runner outlives a killed trainer.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .events import ExecutionEvent
from .loop import run_interruptibly

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = [
    "EXIT_CONFIG_ERROR",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_ORPHANED",
    "EXIT_STORE_UNREACHABLE",
    "ChildStore",
    "name_process",
    "pickle_for_child",
    "runner_process_main",
]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG_ERROR = 2
"""The bundle could not be loaded in the child (an agent that cannot be imported there, ...), or the runner cannot
start as configured (its tracer must capture a framework that is not installed)."""
EXIT_STORE_UNREACHABLE = 3
"""The store could not be reached within the runner's `connect_timeout`."""
EXIT_ORPHANED = 4
"""The parent process disappeared."""
EXIT_INTERRUPTED = 130
"""The algorithm process of `main_process="runner"` was interrupted (Ctrl-C, or its algorithm raised
KeyboardInterrupt)."""

_PARENT_CHECK = 1.0


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


def name_process(name: str) -> None:
    """Give this process a name `ps`, `top` and /proc/PID/comm show (Linux; at most 15 characters; best effort)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # 15: PR_SET_NAME
    except (OSError, AttributeError):
        pass


def runner_process_main(
    payload: bytes,
    worker_id: int,
    child_store: ChildStore,
    stop: ExecutionEvent,
    ready: ExecutionEvent,
    parent_pid: int,
    log_level: int,
) -> None:
    """Entry point of a runner process (module level, so 'spawn' can start it); exits with an `EXIT_*` code.

    SIGINT stays ignored (as the parent started it) while the bundle loads, so a Ctrl-C during the imports prints
    nothing; the parent escalates to SIGTERM if it must. A runner whose run is already over when it has loaded exits
    at once.
    """
    from agentlightning.logging import setup

    name_process(f"agl-runner-{worker_id}")
    if not logging.getLogger("agentlightning").handlers:
        setup(log_level, color=False)
    threading.Thread(target=_watch_parent, args=(parent_pid, stop), name="agl-parent-watch", daemon=True).start()
    try:
        code = _load_and_run(payload, worker_id, child_store, stop, ready)
    except KeyboardInterrupt:
        code = EXIT_OK
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    sys.exit(code)


def _load_and_run(
    payload: bytes, worker_id: int, child_store: ChildStore, stop: ExecutionEvent, ready: ExecutionEvent
) -> int:
    try:
        bundle = pickle.loads(payload)
        store, owned = child_store.open()
    except Exception as exc:
        logger.error("runner-%d could not load what the trainer sent it: %r", worker_id, exc, exc_info=True)
        return EXIT_CONFIG_ERROR
    ready.set()
    if stop.is_set():
        return EXIT_OK
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        run_interruptibly(_run_bundle(bundle, store, owned, worker_id, stop))
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        from agentlightning.instrumentation import InstrumentationError
        from agentlightning.runner.errors import StoreUnreachableError

        if isinstance(exc, StoreUnreachableError):
            logger.error("%s", exc)
            return EXIT_STORE_UNREACHABLE
        if isinstance(exc, InstrumentationError):  # what to install: one line, and no restart would help
            logger.error("runner-%d cannot start: %s", worker_id, exc)
            return EXIT_CONFIG_ERROR
        logger.error("runner-%d stopped on an error: %r", worker_id, exc, exc_info=True)
        return EXIT_ERROR
    return EXIT_OK


async def _run_bundle(bundle: Any, store: LightningStore, owned: bool, worker_id: int, stop: ExecutionEvent) -> None:
    try:
        await bundle(store, worker_id, stop)
    finally:
        if owned:
            try:
                await store.close()
            except Exception as exc:
                logger.warning("runner-%d: closing its store client failed: %r", worker_id, exc)
