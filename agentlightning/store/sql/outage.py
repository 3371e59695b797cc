"""`OutageLog`: whether a database refuses work right now (down, restarting, disk full), logged once per burst.

Every call that meets the problem raises its own `StoreUnavailableError` (or `StoreFullError`), but the log gets one
warning when the problem starts and one line when the database works again, not a line (or a traceback) per refused
call. The storage reports the current problem as `write_problem` (shown by the server's health route).
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
    """The current problem of one database and how many calls it refused; thread-safe."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._lock = threading.Lock()
        self._problem: Optional[StoreUnavailableError] = None
        self._since = 0.0
        self._refused = 0

    @property
    def problem(self) -> Optional[StoreUnavailableError]:
        """The error of the last refused call while the problem lasts; None once a call succeeded again."""
        return self._problem

    def refused(self, error: StoreUnavailableError) -> StoreUnavailableError:
        """Record a refused call (logging the first of a burst); returns `error` for `raise`."""
        with self._lock:
            first = self._problem is None or type(self._problem) is not type(error)
            self._problem = error
            self._refused += 1
            if first:
                self._since = time.monotonic()
        if first:
            logger.warning("%s (logged once, until the store works again)", error)
        return error

    def worked(self, *, write: bool) -> None:
        """Record a call that succeeded: ends the burst (with a log line) if there was one. A full disk ends only
        with a write that succeeded (reads work all along)."""
        problem = self._problem
        if problem is None or (not write and isinstance(problem, StoreFullError)):
            return
        with self._lock:
            problem, refused, since = self._problem, self._refused, self._since
            self._problem, self._refused = None, 0
        if problem is not None:
            logger.warning(
                "The store %s works again after %.1f s (%d calls refused: %s)",
                self.location,
                time.monotonic() - since,
                refused,
                type(problem).__name__,
            )
