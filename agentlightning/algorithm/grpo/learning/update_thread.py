"""The worker thread a GRPO run's updates run on (one at a time, while the event loop keeps serving), and the update
of an interrupted step: Ctrl-C during an update waits for it, so the checkpoint holds the weights it produced."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Optional

__all__ = ["UpdateThread"]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")  # GRPO's log lines keep its logger's name


class UpdateThread:
    """Runs one update at a time; the latest stays pending from `submit` until `settled` (its step is counted)."""

    def __init__(self) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="grpo-update")
        self._pending: Optional[concurrent.futures.Future[dict[str, float]]] = None

    def submit(self, update: Callable[[], dict[str, float]]) -> concurrent.futures.Future[dict[str, float]]:
        """Start `update` (returning its metrics); it is pending until `settled`."""
        self._pending = self._executor.submit(update)
        return self._pending

    def settled(self) -> None:
        """The pending update's step is counted: an interruption from now on does not count it again."""
        self._pending = None

    def finish_pending(self) -> bool:
        """Wait for the update of the interrupted step, if any; True when it completed (its step is then counted)."""
        future, self._pending = self._pending, None
        if future is None:
            return False
        if not future.done():
            logger.warning("Waiting for the running update to finish so the checkpoint is consistent")
        try:
            future.result()
        except Exception as exc:
            logger.warning("The interrupted update failed: %r", exc)
            return False
        return True

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
