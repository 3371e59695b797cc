"""Reading request bodies safely: a size limit (before and after decompression) and a deadline for slow senders."""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

__all__ = ["BodyError", "read_body"]


class BodyError(Exception):
    """The body could not be accepted; `status` is the HTTP answer (408, 411, 413 or 415)."""

    def __init__(self, status: int, error_type: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.error_type = error_type
        self.detail = detail


def _too_large(limit: int) -> BodyError:
    return BodyError(413, "RequestTooLargeError", f"Request body exceeds the limit of {limit} bytes")


async def read_body(
    receive: Any,
    headers: dict[str, str],
    *,
    max_bytes: int,
    timeout_seconds: float,
) -> bytes:
    """The (decompressed) body of a request, read from the ASGI `receive` callable.

    `headers` maps lower-case header names to values. Raises BodyError for a body over `max_bytes`, a sender whose
    whole body does not arrive within `timeout_seconds`, or an unsupported Content-Encoding (gzip and deflate are accepted).
    """
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise BodyError(400, "InvalidArgumentError", f"Invalid Content-Length header: {length!r}")
        if int(length) > max_bytes:
            raise _too_large(max_bytes)
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "", "gzip", "x-gzip", "deflate"):
        raise BodyError(415, "UnsupportedMediaType", f"Unsupported Content-Encoding: {encoding!r}")
    chunks: list[bytes] = []
    received = 0
    more = True
    task = asyncio.current_task()
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        if task is not None:
            task.cancel()

    # One timer for the whole body (cheaper than wait_for per chunk, which creates a task each time).
    timer = asyncio.get_running_loop().call_later(timeout_seconds, expire)
    try:
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise BodyError(400, "ClientDisconnected", "The client disconnected before sending the whole body")
            chunk = message.get("body", b"")
            if chunk:
                received += len(chunk)
                if received > max_bytes:
                    raise _too_large(max_bytes)
                chunks.append(chunk)
            more = bool(message.get("more_body", False))
    except asyncio.CancelledError:
        if not expired:
            raise
        uncancel = getattr(task, "uncancel", None)  # Python >= 3.11: undo our own cancellation request
        if uncancel is not None:
            uncancel()
        raise BodyError(408, "RequestTimeout", f"Request body not received within {timeout_seconds} s") from None
    finally:
        timer.cancel()
    body = b"".join(chunks)
    if encoding in ("gzip", "x-gzip", "deflate") and body:
        body = _decompress(body, encoding, max_bytes)
    return body


def _decompress(body: bytes, encoding: str, max_bytes: int) -> bytes:
    wbits = 31 if encoding in ("gzip", "x-gzip") else 15
    decompressor = zlib.decompressobj(wbits)
    try:
        result = decompressor.decompress(body, max_bytes + 1)
        if len(result) > max_bytes or decompressor.unconsumed_tail:
            raise _too_large(max_bytes)
        result += decompressor.flush()
    except zlib.error as exc:
        raise BodyError(400, "InvalidArgumentError", f"Invalid {encoding} body: {exc}") from None
    if len(result) > max_bytes:
        raise _too_large(max_bytes)
    return result
