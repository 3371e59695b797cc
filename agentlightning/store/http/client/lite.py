"""A small keep-alive HTTP/1.1 client on asyncio streams, used by the store client for `http://` servers.

Why not aiohttp here: importing aiohttp costs ~240 ms (it builds SSL contexts at import time), which a fresh process
paid on its first store request, and a session with its connector costs more per event loop than the requests of a
short task (scripts that run each task in its own `asyncio.run` with a new client). The store protocol needs little:
JSON bodies with a Content-Length (chunked answers are read too), keep-alive, timeouts. `https://` servers still go
through aiohttp.

Connections are pooled per session (one session per event loop, see `sessions.py`). When a session closes with its
loop (`asyncio.run` per task), its idle connections are not closed but parked: the socket is kept process-wide and the
next event loop's session takes it over. A script that runs each task in its own `asyncio.run` therefore keeps one
TCP connection instead of opening one per task (each of which also left a socket in TIME_WAIT behind). A parked
socket is used only if the server has not closed it; after a fork the child drops the parent's.

A request that fails on a reused connection before any byte of the answer arrived (the server closed the idle
connection meanwhile) is sent once more on a new connection; every write carries an Idempotency-Key, so the server
never applies one twice.

Measured against aiohttp and httpx in one run (`benchmarks/store_http_libraries.py`, 2 rounds, medians, commit
1db7e2f, 2026-11-28, 2 cores): 16 client processes 453 rollouts/s against 277 (aiohttp) and 163 (httpx), CPU 3.7 ms
per rollout against 6.4 and 11.6; a fresh client and `asyncio.run` per task 383 tasks/s against 279 and 54; a fresh
process's first request 115 ms against 198 and 224. Kept on those figures (docs/http.md, "Which HTTP client").
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Optional, TypeVar
from urllib.parse import urlsplit

__all__ = ["LiteProtocolError", "LiteResponse", "LiteSession"]

_MAX_HEADER_BYTES = 64 * 1024
_IDLE_SECONDS = 30.0  # below the server's keep-alive timeout (60 s): a pooled connection is never one it dropped
_MAX_IDLE = 16


_parked: dict[tuple[str, int], list[tuple[socket.socket, float]]] = {}
_parked_lock = threading.Lock()


def _forget_parked() -> None:
    with _parked_lock:
        for entries in _parked.values():
            for sock, _ in entries:
                sock.close()  # the child's copy only: the parent's connection stays open
        _parked.clear()


os.register_at_fork(after_in_child=_forget_parked)


def _park(key: tuple[str, int], sock: socket.socket) -> None:
    with _parked_lock:
        entries = _parked.setdefault(key, [])
        if len(entries) < _MAX_IDLE:
            entries.append((sock, time.monotonic()))
            return
    sock.close()


def _unpark(key: tuple[str, int]) -> Optional[socket.socket]:
    """A parked connection to `key` that the server has not closed, or None."""
    while True:
        with _parked_lock:
            entries = _parked.get(key)
            if not entries:
                return None
            sock, parked_at = entries.pop()
        if time.monotonic() - parked_at < _IDLE_SECONDS and _alive(sock):
            return sock
        sock.close()


def _alive(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""  # b"": closed by the server
    except BlockingIOError:
        return True  # nothing to read: open and idle
    except OSError:
        return False


class LiteProtocolError(ConnectionError):
    """The server's answer could not be read (connection closed early, malformed answer)."""


@dataclass
class LiteResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    async def read(self) -> bytes:
        return self.body


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    last_used: float

    def usable(self, now: float) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing() and now - self.last_used < _IDLE_SECONDS

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()


class LiteSession:
    """Keep-alive connections to `http://` servers, for one event loop.

    Args:
        headers: sent with every request.
        connect_timeout: seconds to open a connection.
        read_timeout: seconds to wait for the answer (a request may pass its own).
    """

    def __init__(self, headers: dict[str, str], *, connect_timeout: float, read_timeout: float) -> None:
        self._headers = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self.closed = False

    async def close(self) -> None:
        """Close the session; its idle connections are parked for the next session of this process."""
        self.closed = True
        now = time.monotonic()
        idle, self._idle = self._idle, {}
        for key, connections in idle.items():
            for connection in connections:
                if connection.usable(now):
                    _detach(key, connection)
                else:
                    connection.close()

    @asynccontextmanager
    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Optional[dict[str, str]] = None,
        data: Optional[bytes] = None,
        read_timeout: Optional[float] = None,
    ) -> AsyncIterator[LiteResponse]:
        """Send one request and read the whole answer (an async context manager, like aiohttp's)."""
        yield await self.send(method, url, headers=headers, data=data, read_timeout=read_timeout)

    def get(self, url: str) -> AbstractAsyncContextManager[LiteResponse]:
        return self.request("GET", url)

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: Optional[dict[str, str]] = None,
        data: Optional[bytes] = None,
        read_timeout: Optional[float] = None,
    ) -> LiteResponse:
        if self.closed:
            raise LiteProtocolError("the session is closed")
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"LiteSession serves http:// URLs only, got {url!r}")
        host, port = parts.hostname, parts.port or 80
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = f"[{host}]" if ":" in host else host
        head = f"{method} {target} HTTP/1.1\r\nHost: {host_header}:{port}\r\n{self._headers}"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        body = data or b""
        if body or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Length: {len(body)}\r\n"
        payload = head.encode("latin-1") + b"\r\n" + body
        timeout = self._read_timeout if read_timeout is None else read_timeout
        key = (host, port)
        connection = self._take_idle(key)
        if connection is not None:
            try:
                return await self._exchange(connection, key, method, payload, timeout)
            except _StaleConnection:
                pass  # the server closed the idle connection: send once more on a new one
        connection = await self._connect(host, port)
        try:
            return await self._exchange(connection, key, method, payload, timeout)
        except _StaleConnection as exc:
            raise LiteProtocolError(f"the server closed the connection without answering ({exc.__cause__!r})") from None

    def _take_idle(self, key: tuple[str, int]) -> Optional[_Connection]:
        connections = self._idle.get(key)
        now = time.monotonic()
        while connections:
            connection = connections.pop()
            if connection.usable(now):
                return connection
            connection.close()
        return None

    async def _connect(self, host: str, port: int) -> _Connection:
        parked = _unpark((host, port))
        if parked is not None:
            try:
                reader, writer = await asyncio.open_connection(sock=parked, limit=_MAX_HEADER_BYTES * 16)
                return _Connection(reader, writer, time.monotonic())
            except OSError:
                parked.close()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=_MAX_HEADER_BYTES * 16), self._connect_timeout
            )
        except asyncio.TimeoutError:
            raise asyncio.TimeoutError(f"connecting to {host}:{port} took over {self._connect_timeout:g} s") from None
        return _Connection(reader, writer, time.monotonic())

    async def _exchange(
        self, connection: _Connection, key: tuple[str, int], method: str, payload: bytes, timeout: float
    ) -> LiteResponse:
        reusable = False
        try:
            connection.writer.write(payload)
            try:
                await connection.writer.drain()
                status_line = await _within(connection.reader.readline(), timeout)
            except asyncio.TimeoutError:
                raise  # no answer in time (an OSError since Python 3.11): not a stale connection to retry on
            except (ConnectionError, OSError) as exc:
                raise _StaleConnection() from exc
            if not status_line:
                raise _StaleConnection()
            response, reusable = await _within(self._read_rest(connection.reader, status_line, method), timeout)
            return response
        finally:
            if reusable and not self.closed:
                connection.last_used = time.monotonic()
                idle = self._idle.setdefault(key, [])
                if len(idle) < _MAX_IDLE:
                    idle.append(connection)
                else:
                    connection.close()
            else:
                connection.close()

    async def _read_rest(
        self, reader: asyncio.StreamReader, status_line: bytes, method: str
    ) -> tuple[LiteResponse, bool]:
        try:
            version, status_text = status_line.decode("latin-1").split(" ", 2)[:2]
            status = int(status_text)
        except ValueError:
            raise LiteProtocolError(f"malformed status line {status_line[:100]!r}") from None
        headers: dict[str, str] = {}
        size = 0
        while True:
            line = await reader.readline()
            size += len(line)
            if size > _MAX_HEADER_BYTES:
                raise LiteProtocolError("the answer's headers are too large")
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise LiteProtocolError("the connection closed inside the answer's headers")
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        connection_header = headers.get("connection", "").lower()
        keep_alive = "close" not in connection_header and (version != "HTTP/1.0" or "keep-alive" in connection_header)
        try:
            if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
                body = b""
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                body = await _read_chunked(reader)
            elif "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            else:
                body, keep_alive = await reader.read(), False
        except asyncio.IncompleteReadError:
            raise LiteProtocolError("the connection closed inside the answer's body") from None
        return LiteResponse(status, headers, body), keep_alive


def _detach(key: tuple[str, int], connection: _Connection) -> None:
    """Park the connection's socket (a duplicate descriptor) and close the loop-bound transport."""
    transport_socket = connection.writer.get_extra_info("socket")
    try:
        duplicate = socket.socket(fileno=os.dup(transport_socket.fileno()))
    except (OSError, AttributeError):
        connection.close()
        return
    # Closing the transport closes its descriptor only (the duplicate keeps the connection open). Not awaited: a
    # session may be closed from a loop that runs only now and then (a finaliser on the span writer's loop), and a
    # wait here would leave a pending task behind when that loop stops.
    connection.close()
    _park(key, duplicate)


T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def _within(awaitable: Awaitable[T], timeout: float) -> T:
        """`awaitable`, cancelled after `timeout` seconds (asyncio.TimeoutError): without the task `wait_for` makes."""
        async with asyncio.timeout(timeout):
            return await awaitable

else:  # pragma: no cover - Python 3.10
    _within = asyncio.wait_for


class _StaleConnection(Exception):
    """Sending failed, or the connection closed before the first byte of the answer."""


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    pieces = []
    while True:
        size_line = await reader.readline()
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise LiteProtocolError(f"malformed chunk size {size_line[:50]!r}") from None
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(pieces)
        pieces.append(await reader.readexactly(size))
        await reader.readexactly(2)
