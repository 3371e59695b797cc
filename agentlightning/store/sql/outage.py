"""`OutageLog`: whether a database refuses work right now (down, restarting, disk full), logged once per burst.

Every call that meets the problem raises its own `StoreUnavailableError` (or `StoreFullError`), but the log gets one
warning when a burst of refusals starts and one line at the first call that works again, not a line (or a traceback)
per refused call. A burst ends when no call was refused for `quiet_seconds`: on a nearly full disk small writes may
succeed between refused large ones, and those flips are not logged again. The storage reports the problem of its
latest refused call, until a later call works, as `write_problem` (shown by the server's health route).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from agentlightning.store.errors import StoreFullError, StoreUnavailableError

__all__ = ["OutageLog"]

logger = logging.getLogger("agentlightning.store.outage")


class OutageLog:
    """The current problem of one database and the refusals of the current burst; thread-safe."""

    def __init__(self, location: str, *, quiet_seconds: float = 60.0) -> None:
        self.location = location
        self.quiet_seconds = quiet_seconds
        self._lock = threading.Lock()
        self._problem: Optional[StoreUnavailableError] = None
        self._burst_kind: Optional[type[StoreUnavailableError]] = None
        self._burst_start = 0.0
        self._last_refusal = float("-inf")
        self._refused = 0
        self._recovery_logged = False

    @property
    def problem(self) -> Optional[StoreUnavailableError]:
        """The error of the latest refused call; None once a later call worked."""
        return self._problem

    def refused(self, error: StoreUnavailableError) -> StoreUnavailableError:
        """Record a refused call (logging the first of a burst); returns `error` for `raise`."""
        now = time.monotonic()
        with self._lock:
            new_burst = now - self._last_refusal >= self.quiet_seconds or self._burst_kind is not type(error)
            if new_burst:
                self._burst_kind, self._burst_start, self._refused, self._recovery_logged = type(error), now, 0, False
            self._problem = error
            self._last_refusal = now
            self._refused += 1
        if new_burst:
            logger.warning("%s (logged once per burst)", error)
        return error

    def worked(self, *, write: bool) -> None:
        """Record a call that succeeded. A full disk is resolved only by a write (reads work all along)."""
        problem = self._problem
        if problem is None or (not write and isinstance(problem, StoreFullError)):
            return
        with self._lock:
            self._problem = None
            log_it, self._recovery_logged = not self._recovery_logged, True
            refused, since = self._refused, self._burst_start
        if log_it:
            logger.warning(
                "The store %s works again after %.1f s (%d calls refused: %s)",
                self.location,
                time.monotonic() - since,
                refused,
                type(problem).__name__,
            )
