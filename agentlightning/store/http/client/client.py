"""`LightningStoreClient`: the whole LightningStore contract over HTTP.

Every method is one request built from the operations table. Store errors come back as the same typed
exceptions with the same messages; returned values have the same types as a direct store's. Writes carry an
Idempotency-Key, so the retries of connection failures and 502/503/504 answers never apply a write twice.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from agentlightning.store.base import (
    LightningStoreCapabilities,
)
from agentlightning.store.core.validation import check_id, check_timeout
from agentlightning.store.delegating import DelegatingStore
from agentlightning.store.forwarding import given_arguments
from agentlightning.store.http.client.retry import FixedDelays, RetryPolicy
from agentlightning.store.http.client.transport import HttpTransport
from agentlightning.store.http.errors import InvalidArgumentTypeError, StoreConnectionError
from agentlightning.store.http.operations import API_PREFIX
from agentlightning.types import (
    AttemptedRollout,
    EnqueueRolloutRequest,
    Rollout,
    RolloutConfig,
    RolloutMode,
    Span,
    TaskInput,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["API_KEY_ENV", "LightningStoreClient"]

logger = logging.getLogger(__name__)

API_KEY_ENV = "AGL_STORE_API_KEY"
_DEFAULT_WAIT_SLICE = 5.0


class LightningStoreClient(DelegatingStore):
    """A LightningStore served by a LightningStoreServer at `server_address` (e.g. "http://127.0.0.1:4747").

    As in 0.3, the attribute `server_address` is the API base (`{root}/v1/agl`, to which REST paths such as
    `/rollouts` are appended) and `server_address_root` is the bare root.

    Args:
        server_address: root URL of the server; a trailing "/" or "/v1/agl" is ignored.
        retry_delays: explicit waits before each retry (the 0.2 behaviour); `()` disables retries. By default the
            client follows `retry_policy` (exponential backoff with jitter).
        health_retry_delays: when given, the client probes `/v1/agl/health` after a failed try, waiting these
            delays between probes, and gives up at once if the server never answers (the 0.2 behaviour).
        request_timeout: seconds to wait for an answer (long polls add their own wait to it).
        connection_timeout: seconds to establish a connection.
        api_key: bearer token; defaults to the AGL_STORE_API_KEY environment variable.
        retry_policy: backoff used when `retry_delays` is not given.
        wait_slice_seconds: longest single long-poll request of `wait_for_rollouts`.
    """

    def __init__(
        self,
        server_address: str,
        *,
        retry_delays: Optional[Sequence[float]] = None,
        health_retry_delays: Sequence[float] = (),
        request_timeout: float = 30.0,
        connection_timeout: float = 5.0,
        api_key: Optional[str] = None,
        retry_policy: Optional[RetryPolicy] = None,
        wait_slice_seconds: float = _DEFAULT_WAIT_SLICE,
    ) -> None:
        if not isinstance(server_address, str) or not server_address.startswith(("http://", "https://")):
            raise ValueError(f"server_address must be an http:// or https:// URL, got {server_address!r}")
        if request_timeout <= 0 or connection_timeout <= 0 or wait_slice_seconds <= 0:
            raise ValueError("request_timeout, connection_timeout and wait_slice_seconds must be positive")
        root = server_address.rstrip("/")
        if root.endswith(API_PREFIX):
            root = root[: -len(API_PREFIX)]
        self.server_address_root = root
        """The server's root URL (the OTLP receiver and /v1/prometheus live under it)."""
        self.server_address = root + API_PREFIX
        """The API base URL, `{server_address_root}/v1/agl`."""
        retries: Union[RetryPolicy, FixedDelays] = (
            RetryPolicy.fixed(retry_delays) if retry_delays is not None else retry_policy or RetryPolicy()
        )
        self._transport = HttpTransport(
            root,
            retries=retries,
            health_retry_delays=tuple(float(delay) for delay in health_retry_delays),
            request_timeout=float(request_timeout),
            connection_timeout=float(connection_timeout),
            api_key=api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None,
        )
        self._wait_slice = float(wait_slice_seconds)
        self._unanswered_claims: list[tuple[str, int, Optional[str]]] = []
        """(Idempotency-Key, limit, worker_id) of claims whose answer never arrived, replayed by the next dequeue."""

    # --------------------------------------------------------------------------------------------- plumbing
    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=True, async_safe=True, zero_copy=False, otlp_traces=True)

    @property
    def is_remote(self) -> bool:
        return True

    def otlp_traces_endpoint(self) -> str:
        return f"{self.server_address_root}/v1/traces"

    async def close(self) -> None:
        await self._transport.close()

    async def _call(self, operation: str, /, *, _wait: float = 0.0, **arguments: Any) -> Any:
        return await self._transport.call(operation, extra_timeout=_wait, **arguments)

    async def _forward(self, operation: str, arguments: dict[str, Any]) -> Any:
        return await self._call(operation, **given_arguments(operation, arguments))

    # --------------------------------------------------------------------------------------------- rollouts
    async def enqueue_rollout(
        self,
        input: TaskInput,
        mode: Optional[RolloutMode] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> Rollout:
        request = {"input": input, "mode": mode, "resources_id": resources_id, "config": config, "metadata": metadata}
        return (await self._call("enqueue_many_rollouts", rollouts=[request]))[0]

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        if isinstance(rollouts, (str, bytes)) or not isinstance(rollouts, Sequence):
            raise InvalidArgumentTypeError(f"rollouts must be a list of EnqueueRolloutRequest, got {rollouts!r}")
        if not rollouts:
            return []
        return await self._call("enqueue_many_rollouts", rollouts=list(rollouts))

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Optional[AttemptedRollout]:
        claimed = await self.dequeue_many_rollouts(limit=1, worker_id=worker_id)
        return claimed[0] if claimed else None

    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: Optional[str] = None
    ) -> Sequence[AttemptedRollout]:
        if isinstance(limit, int) and not isinstance(limit, bool) and limit <= 0:
            return []
        while self._unanswered_claims:
            # A claim whose answer was lost: the same Idempotency-Key makes the server replay the claimed rollouts
            # (while it remembers the key; the server re-queues claims nobody acknowledged after that).
            try:
                pending = self._unanswered_claims.pop(0)
            except IndexError:  # another task took it
                break
            try:
                replayed = await self._claim(*pending)
            except StoreConnectionError as exc:
                self._unanswered_claims.insert(0, pending)
                return self._unreachable(exc)
            if replayed:
                return replayed
        return await self._claim(uuid.uuid4().hex, limit, worker_id, remember=True)

    async def _claim(
        self, key: str, limit: int, worker_id: Optional[str], *, remember: bool = False
    ) -> Sequence[AttemptedRollout]:
        try:
            return await self._transport.call(
                "dequeue_many_rollouts", idempotency_key=key, limit=limit, worker_id=worker_id
            )
        except StoreConnectionError as exc:
            if remember:
                self._unanswered_claims.append((key, limit, worker_id))
                return self._unreachable(exc)
            raise

    def _unreachable(self, exc: StoreConnectionError) -> list[AttemptedRollout]:
        """A server that answered before and is unreachable now is an empty queue for a polling runner (as in
        0.3); a server this client never reached is a configuration error and raises."""
        if not self._transport.reached_server:
            raise exc
        logger.warning("dequeue: the store server is not reachable (%s)", exc)
        return []

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: Optional[float] = None) -> list[Rollout]:
        """Long-polls the server in slices of at most `wait_slice_seconds` until every known rollout finished or
        `timeout` passed (None waits forever). Cancelling the caller cancels the wait on the server too."""
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = list(dict.fromkeys(rollout_ids)) if isinstance(rollout_ids, (list, tuple)) else rollout_ids
        finished: dict[str, Rollout] = {}
        checked_known = False
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = self._wait_slice if remaining is None else min(self._wait_slice, remaining)
            done: list[Rollout] = await self._call("wait_for_rollouts", _wait=wait, rollout_ids=pending, timeout=wait)
            finished.update((rollout.rollout_id, rollout) for rollout in done)
            pending = [rollout_id for rollout_id in pending if rollout_id not in finished]
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                break
            if not checked_known:
                # Unknown ids are ignored, as by a direct store: find them once, then stop waiting for them.
                checked_known = True
                known = await self.query_rollouts(rollout_id_in=pending)
                known_ids = {rollout.rollout_id for rollout in known}
                pending = [rollout_id for rollout_id in pending if rollout_id in known_ids]
                if not pending:
                    break
        return [finished[rollout_id] for rollout_id in rollout_ids if rollout_id in finished]

    # ------------------------------------------------------------------------------------------------ spans
    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence):
            raise InvalidArgumentTypeError(f"spans must be a list of Span, got {type(spans).__name__}")
        if not spans:
            return []
        return await self._call("add_many_spans", spans=list(spans))

    async def add_otel_span(
        self,
        rollout_id: str,
        attempt_id: str,
        readable_span: ReadableSpan,
        sequence_id: Optional[int] = None,
    ) -> Optional[Span]:
        """Converts the span here and stores it in one request; the server allocates a missing sequence id."""
        rollout_id = check_id(rollout_id, "rollout_id")
        attempt_id = check_id(attempt_id, "attempt_id")
        if sequence_id is not None and (isinstance(sequence_id, bool) or not isinstance(sequence_id, int)):
            raise InvalidArgumentTypeError(f"sequence_id must be an integer, got {sequence_id!r}")
        span = Span.from_opentelemetry(
            readable_span, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id or 0
        )
        payload: Any = span if sequence_id is not None else span.model_dump(exclude={"sequence_id"})
        return await self._call("add_span", span=payload)

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        return (await self._call("get_next_span_sequence_id", rollout_id=rollout_id, attempt_id=attempt_id)).sequence_id

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        if not rollout_attempt_ids:
            return []
        pairs = [list(pair) if isinstance(pair, tuple) else pair for pair in rollout_attempt_ids]
        return (await self._call("get_many_span_sequence_ids", rollout_attempt_ids=pairs)).sequence_ids
