"""Patience: the algorithm's store calls ride out a store that is restarting or briefly unreachable.

Runners already wait for their store through an outage; the algorithm side used to give up after the store client's
own retries (about 6 s), while a store server restart takes longer. The trainer therefore hands every algorithm its
store wrapped in `PatientStore`: each call that fails with an outage (`is_transient_store_error`: connection errors,
timeouts, 502/503/504, a database that is busy or reopening) is tried again for up to `patience_seconds`, with a
warning when the wait begins, a line every `PROGRESS_EVERY` seconds while it lasts, and one when the store is back.
Other errors are raised at once. A write retried this way is not applied twice: the store client sends an identical
request whose outcome stayed unknown with the same Idempotency-Key (see `store/http/client/unanswered.py`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Optional, TypeVar

from agentlightning.store.base import LightningStore, LightningStoreCapabilities
from agentlightning.store.delegating import DelegatingStore
from agentlightning.store.forwarding import call_store
from agentlightning.utils.retry import FOREVER, RetryAttempt, RetryEvent, RetryPolicy, retry_async

__all__ = ["DEFAULT_STORE_PATIENCE", "PatientStore", "call_with_patience", "unwrap_store"]

logger = logging.getLogger(__name__)

R = TypeVar("R")

DEFAULT_STORE_PATIENCE = 120.0
"""Seconds an algorithm's store call waits for an unreachable store before it fails (`Trainer(store_patience=...)`)."""
PROGRESS_EVERY = 10.0
"""Seconds between the "still waiting" lines of a long wait."""
_BACKOFF = RetryPolicy(max_retries=FOREVER, initial_delay=0.2, max_delay=2.0, jitter=0.0)


async def call_with_patience(
    operation: Callable[[], Awaitable[R]],
    *,
    what: str,
    where: str,
    patience_seconds: float,
    clock: Callable[[], float] = time.monotonic,
    on_wait: Optional[Callable[[bool], None]] = None,
) -> R:
    """Run `operation`, trying again through an outage of the store at `where` for up to `patience_seconds`.

    `on_wait(True)` is called when the wait begins and `on_wait(False)` when it ends (either way).

    Raises:
        the last error: an error that is not an outage at once, an outage once the patience is spent (a
        ConnectionError then says how long it waited and which option sets that).
    """
    from agentlightning.runner.errors import is_transient_store_error

    started = clock()
    waiting = False
    last_report = started

    def worth_waiting(exc: Exception) -> bool:
        return is_transient_store_error(exc) and clock() - started < patience_seconds

    def report(event: RetryEvent) -> None:
        nonlocal waiting, last_report
        now = clock()
        if not waiting:
            waiting = True
            last_report = now
            if on_wait is not None:
                on_wait(True)
            logger.warning(
                "The store at %s is unreachable (%s: %r): waiting up to %g s for it (store_patience)",
                where,
                what,
                event.error,
                patience_seconds,
            )
        elif now - last_report >= PROGRESS_EVERY:
            last_report = now
            logger.warning("Still waiting for the store at %s (%s): unreachable for %.0f s", where, what, now - started)

    async def attempt(_: RetryAttempt) -> R:
        return await operation()

    try:
        result = await retry_async(attempt, _BACKOFF, what=what, retry_on=worth_waiting, on_retry=report)
    except ConnectionError as exc:
        if waiting and on_wait is not None:
            on_wait(False)
        if not waiting:
            raise
        note = (
            f"{exc} (the algorithm waited {clock() - started:.0f} s for the store at {where}; "
            "Trainer(store_patience=...) sets how long)"
        )
        try:
            explained = type(exc)(note)
        except TypeError:  # an error class with another constructor: keep it as it is
            raise exc from None
        raise explained from exc
    if waiting:
        if on_wait is not None:
            on_wait(False)
        logger.warning(
            "The store at %s is reachable again after %.1f s (%s went through)", where, clock() - started, what
        )
    return result


class PatientStore(DelegatingStore):
    """`store` whose every call rides out an outage for up to `patience_seconds` (see the module docstring).

    Attributes other than the store operations (a client's `server_address`, say) are the wrapped store's.
    """

    def __init__(self, store: LightningStore, *, patience_seconds: float = DEFAULT_STORE_PATIENCE) -> None:
        if isinstance(patience_seconds, bool) or not isinstance(patience_seconds, (int, float)) or patience_seconds < 0:
            raise ValueError(f"store_patience must be a number of seconds >= 0, got {patience_seconds!r}")
        self.store = store
        self.patience_seconds = float(patience_seconds)
        self._waiting: list[float] = []  # when each call now waiting for the store began to wait (monotonic)

    @property
    def waiting_for(self) -> Optional[float]:
        """Seconds the longest-waiting call has been waiting for the store (None: no call is waiting): what the
        Trainer's progress shows as "waiting for the store"."""
        return time.monotonic() - min(self._waiting) if self._waiting else None

    def _on_wait(self, started: bool) -> None:
        if started:
            self._waiting.append(time.monotonic())
        elif self._waiting:
            self._waiting.pop(0)

    def __getattr__(self, name: str) -> Any:
        if name in ("store", "_waiting"):  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.store, name)

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return self.store.capabilities

    @property
    def is_remote(self) -> bool:
        return self.store.is_remote

    def otlp_traces_endpoint(self) -> str:
        return self.store.otlp_traces_endpoint()

    async def close(self) -> None:
        await self.store.close()

    async def _forward(self, operation: str, arguments: dict[str, Any]) -> Any:
        from agentlightning.runner.errors import describe_store

        return await call_with_patience(
            lambda: call_store(self.store, operation, arguments),
            what=operation,
            where=describe_store(self.store),
            patience_seconds=self.patience_seconds,
            on_wait=self._on_wait,
        )


def unwrap_store(store: Any) -> Any:
    """The store inside a `PatientStore` (any other store as it is)."""
    while isinstance(store, PatientStore):
        store = store.store
    return store
