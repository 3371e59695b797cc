"""Sending store operations to a server: per-loop sessions, URLs, JSON encoding, retries and idempotency keys."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import uuid
from typing import TYPE_CHECKING, Any, Optional, Union
from urllib.parse import quote

from pydantic_core import PydanticSerializationError, from_json, to_json

from agentlightning.store.base import Unset
from agentlightning.store.core.validation import check_id
from agentlightning.store.http.client.lite import LiteSession
from agentlightning.store.http.client.retry import RETRYABLE_STATUSES, FixedDelays, RetryPolicy
from agentlightning.store.http.client.sessions import SessionPool
from agentlightning.store.http.client.unanswered import UnansweredWrites, request_digest
from agentlightning.store.http.errors import (
    InvalidArgumentTypeError,
    StoreConnectionError,
    StoreHTTPError,
    error_from_response,
)
from agentlightning.store.http.operations import API_PREFIX, OPERATIONS_BY_NAME, RESERVED_SEGMENTS, Operation
from agentlightning.utils.retry import RetryAttempt, RetryError, RetryEvent, retry_async

if TYPE_CHECKING:
    import aiohttp

__all__ = ["HttpTransport"]

logger = logging.getLogger(__name__)

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9._~:@!$&'()*+,;=-]+$")


class HttpTransport:
    """Runs operations of the table against the server at `server_address`. Safe to share between threads and
    event loops; picklable (sessions are not carried over)."""

    def __init__(
        self,
        server_address: str,
        *,
        retries: Union[RetryPolicy, FixedDelays],
        health_retry_delays: tuple[float, ...],
        request_timeout: float,
        connection_timeout: float,
        api_key: Optional[str],
    ) -> None:
        self.server_address = server_address
        self._retries = retries
        self._health_retry_delays = health_retry_delays
        self._request_timeout = request_timeout
        self._connection_timeout = connection_timeout
        self._api_key = api_key
        self._pool = SessionPool(self._new_session)
        self._unanswered = UnansweredWrites()
        self.reached_server = False
        """True once the server answered at least once."""
        self._warned_keyless = False

    def _warn_keyless(self) -> None:
        self._warned_keyless = True
        logger.warning(
            "The LightningStore server at %s requires no API key: the api_key this client was given (argument or "
            "$AGL_STORE_API_KEY) is not checked there. Was the server started without --api-key, or is the key meant "
            "for another server?",
            self.server_address,
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_pool"]
        del state["_unanswered"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool = SessionPool(self._new_session)
        self._unanswered = UnansweredWrites()

    async def close(self) -> None:
        await self._pool.close()

    async def call(
        self, operation: str, /, *, extra_timeout: float = 0.0, idempotency_key: Optional[str] = None, **arguments: Any
    ) -> Any:
        """Run one operation remotely and decode its answer. UNSET arguments are left out. Writes carry
        `idempotency_key`, so that sending the same request again replays its answer. When it is None, the write
        takes the key of an identical earlier write whose outcome stayed unknown (see `unanswered.py`), else a fresh
        one."""
        op = OPERATIONS_BY_NAME[operation]
        args = {key: value for key, value in arguments.items() if not isinstance(value, Unset)}
        url, rest = self._target(op, args)
        method = op.method
        data: Optional[bytes] = None
        if url.endswith(op.ops_route):
            method, data = "POST", self._encode(op, rest)
        elif op.body is not None:
            data = self._encode(op, rest[op.body_argument] if op.body_argument else rest)
        digest: Optional[str] = None
        if not op.idempotent and idempotency_key is None:
            digest = request_digest(op.name, method, url, data)
            idempotency_key = self._unanswered.take(digest) or uuid.uuid4().hex
        try:
            payload = await self._request(
                op, method, url, data, extra_timeout=extra_timeout, idempotency_key=idempotency_key
            )
        except (_OutcomeUnknown, asyncio.CancelledError) as unknown:
            if digest is not None and idempotency_key is not None:
                self._unanswered.put(digest, idempotency_key)
            if not isinstance(unknown, _OutcomeUnknown):
                raise
            error = unknown.error
            if digest is not None and isinstance(error, StoreConnectionError):
                raise StoreConnectionError(f"{error}{_UNKNOWN_OUTCOME}") from error.__cause__
            raise error from error.__cause__
        return op.response_adapter.validate_json(payload)

    def _new_session(self) -> Union[aiohttp.ClientSession, LiteSession]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if self.server_address.startswith("http://") and os.environ.get("_AGL_HTTP_CLIENT") != "aiohttp":
            # No aiohttp import (~240 ms) on a fresh process's first request, and a cheap session per event loop.
            # (`_AGL_HTTP_CLIENT=aiohttp` takes aiohttp for http:// too: benchmarks/store_http.py compares them.)
            return LiteSession(headers, connect_timeout=self._connection_timeout, read_timeout=self._request_timeout)
        import aiohttp

        return aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(
                total=None, connect=self._connection_timeout, sock_read=self._request_timeout
            ),
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0),
            raise_for_status=False,
        )

    def _target(self, op: Operation, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The URL of a call and the arguments left for the body. Ids that cannot travel in a path segment make
        the call go to the operation's `/ops/{name}` route with every argument in the body."""
        ids = {name: check_id(args[name], name) for name in op.path_params}
        reserved = RESERVED_SEGMENTS.get(op.name, frozenset())
        if any(value in reserved or not _SAFE_SEGMENT.match(value) for value in ids.values()):
            return self.server_address + op.ops_route, args
        path = op.path.format(**{name: quote(value, safe="") for name, value in ids.items()})
        rest = {name: value for name, value in args.items() if name not in ids}
        return self.server_address + API_PREFIX + path, rest

    def _encode(self, op: Operation, body: Any) -> bytes:
        try:
            return to_json(body, inf_nan_mode="constants")
        except PydanticSerializationError as exc:
            raise InvalidArgumentTypeError(f"The arguments of {op.name} cannot be sent as JSON: {exc}") from None

    async def _request(
        self,
        op: Operation,
        method: str,
        url: str,
        data: Optional[bytes],
        *,
        extra_timeout: float = 0.0,
        idempotency_key: Optional[str] = None,
    ) -> bytes:
        """Send a request, retrying connection failures and 502/503/504; the body of the 2xx answer."""
        headers = {} if op.idempotent else {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
        options: dict[str, Any] = {"headers": headers, "data": data}
        if extra_timeout:
            if self.server_address.startswith("http://"):
                options["read_timeout"] = self._request_timeout + extra_timeout
            else:
                import aiohttp

                options["timeout"] = aiohttp.ClientTimeout(
                    total=None, connect=self._connection_timeout, sock_read=self._request_timeout + extra_timeout
                )
        connection_errors = _connection_errors()

        async def send(attempt: RetryAttempt) -> bytes:
            session: Any = await self._pool.get()
            async with session.request(method, url, **options) as response:
                body = await response.read()
                status = response.status
            self.reached_server = True
            if self._api_key and not self._warned_keyless and response.headers.get("x-agl-auth") == "none":
                self._warn_keyless()
            if status < 300:
                return body
            error = error_from_response(status, _decode_error(body))
            if status in RETRYABLE_STATUSES:
                raise _RetryableAnswer(status, error)
            raise error

        def log_retry(event: RetryEvent) -> None:
            logger.debug("%s %s failed (try %d): %r", method, url, event.attempt, event.error)

        try:
            return await retry_async(
                send,
                self._retries,
                what=f"{op.name} ({method} {url})",
                retry_on=lambda exc: isinstance(exc, (_RetryableAnswer, *connection_errors)),
                on_retry=log_retry,
                ready=self._wait_until_healthy if self._health_retry_delays else None,
            )
        except RetryError as exhausted:
            failure = exhausted.cause
            if isinstance(failure, _RetryableAnswer):
                error: BaseException = failure.error
                error.__cause__ = None
            else:
                error = StoreConnectionError(
                    f"Cannot reach the LightningStore server at {self.server_address} ({op.name}): {failure!r}"
                )
                error.__cause__ = failure
            if op.idempotent:
                raise error from error.__cause__
            raise _OutcomeUnknown(error) from None

    async def _wait_until_healthy(self) -> bool:
        """Probe the health route with the 0.2 `health_retry_delays`; False if it never answers 200."""

        async def probe(attempt: RetryAttempt) -> None:
            session: Any = await self._pool.get()
            async with session.get(f"{self.server_address}{API_PREFIX}/health") as response:
                if response.status != 200:
                    raise StoreHTTPError(response.status, "the health route did not answer 200", "Unhealthy")

        def log_probe(event: RetryEvent) -> None:
            logger.debug("health probe failed: %r", event.error)

        try:
            await retry_async(
                probe,
                FixedDelays(self._health_retry_delays),
                what="health probe",
                retry_on=lambda exc: True,
                on_retry=log_probe,
            )
        except RetryError as exhausted:
            logger.debug("health probe failed: %r", exhausted.cause)
            return False
        return True


_UNKNOWN_OUTCOME = (
    ". Outcome unknown: the server may have applied this write before the connection failed. Sending the same "
    "request again through this client is answered with the first result, not applied twice (it reuses the "
    "Idempotency-Key); from another process, check first, e.g. query_rollouts for a metadata marker of yours "
    "(docs/http.md: writes whose outcome is unknown)"
)


class _OutcomeUnknown(Exception):
    """A write ran out of retries without an answer; `error` is what the caller sees."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _RetryableAnswer(Exception):
    """A 502/503/504 answer, carried through the retry loop; `error` is what the caller sees if it is the last."""

    def __init__(self, status: int, error: BaseException) -> None:
        super().__init__(f"HTTP {status}: {error}")
        self.error = error


def _connection_errors() -> tuple[type[BaseException], ...]:
    """What counts as a failure to reach the server (retried): socket errors, timeouts, a broken answer, and
    aiohttp's connection errors when aiohttp is in use (it is imported only for https:// servers)."""
    errors: tuple[type[BaseException], ...] = (OSError, asyncio.TimeoutError)
    aiohttp = sys.modules.get("aiohttp")
    # Another thread (a heartbeat, an instrumented agent) may be importing aiohttp right now: a partially
    # initialised module has no error classes yet, and no request of ours can be using it then.
    connection_error = getattr(aiohttp, "ClientConnectionError", None)
    payload_error = getattr(aiohttp, "ClientPayloadError", None)
    if connection_error is not None and payload_error is not None:
        errors += (connection_error, payload_error)
    return errors


def _decode_error(body: bytes) -> Any:
    try:
        return from_json(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:500]
