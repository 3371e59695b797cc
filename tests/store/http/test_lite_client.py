"""The store client's HTTP/1.1 connection handling (`store/http/client/lite.py`) and what a fresh process pays for it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentlightning.store.http.client.lite import LiteProtocolError, LiteSession

from .conftest import start_server, stop_server

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    servers: list[asyncio.Server] = []

    async def serve(handler: Handler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield serve
    for server in servers:
        server.close()


def session() -> LiteSession:
    return LiteSession({"Accept": "application/json"}, connect_timeout=5.0, read_timeout=10.0)


async def test_requests_reuse_one_keep_alive_connection(raw_server: Callable[[Handler], Awaitable[str]]) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        writer.close()

    url = await raw_server(handler)
    client = session()
    for _ in range(5):
        async with client.request("POST", url + "/x", data=b'{"a":1}') as response:
            assert (response.status, await response.read()) == (200, b"{}")
    await client.close()
    assert connections == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced_at_once(
    raw_server: Callable[[Handler], Awaitable[str]],
) -> None:
    async def answer_once_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnull")
        await writer.drain()
        writer.close()  # keep-alive announced, yet closed: the next request finds a dead pooled connection

    url = await raw_server(answer_once_then_close)
    client = session()
    for _ in range(3):
        async with client.request("GET", url + "/x") as response:
            assert await response.read() == b"null"
    await client.close()


async def test_a_chunked_answer_is_read_whole(raw_server: Callable[[Handler], Awaitable[str]]) -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n[1,\r\n2\r\n2]\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    url = await raw_server(chunked)
    client = session()
    async with client.request("GET", url + "/x") as response:
        assert json.loads(await response.read()) == [1, 2]
    await client.close()


async def test_an_answer_cut_short_is_a_connection_error(raw_server: Callable[[Handler], Awaitable[str]]) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        await writer.drain()
        writer.close()

    url = await raw_server(cut)
    client = session()
    with pytest.raises(LiteProtocolError):
        async with client.request("GET", url + "/x"):
            pass
    await client.close()


_FRESH_CLIENT = r"""
import asyncio, json, sys
import agentlightning as agl

async def main():
    client = agl.LightningStoreClient(sys.argv[1])
    rollout = await client.start_rollout({"q": 1})
    await client.close()
    return rollout.rollout_id

rollout_id = asyncio.run(main())
print(json.dumps({"rollout": rollout_id, "loaded": sorted(m for m in ("aiohttp", "starlette", "fastapi") if m in sys.modules)}))
"""


def test_a_fresh_process_talks_to_the_store_without_importing_aiohttp_or_the_server() -> None:
    server = start_server()
    try:
        out = subprocess.run(
            [sys.executable, "-c", _FRESH_CLIENT, server.endpoint], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        stop_server(server)
    assert result["rollout"].startswith("ro-")
    assert result["loaded"] == []


def test_many_short_lived_event_loops_each_close_their_connection() -> None:
    from agentlightning.store.http.client.client import LightningStoreClient

    server = start_server()
    try:
        client = LightningStoreClient(server.endpoint)

        async def task() -> int:
            await client.query_rollouts(limit=1)
            pool = client._transport._pool  # pyright: ignore[reportPrivateUsage]
            return len(pool._entries)  # pyright: ignore[reportPrivateUsage]

        live = [asyncio.run(task()) for _ in range(20)]
    finally:
        stop_server(server)
    assert max(live) == 1  # sessions of finished loops are not kept


def test_successive_event_loops_share_one_connection_and_leak_no_descriptor() -> None:
    """`asyncio.run` per task with a new session each time: the connection is handed over, not reopened."""
    import os
    import socketserver
    import threading

    accepted = 0

    class KeepAlive(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            nonlocal accepted
            accepted += 1
            while True:
                line = self.rfile.readline()
                if not line:
                    return
                while self.rfile.readline() not in (b"\r\n", b""):
                    pass
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]")
                self.wfile.flush()

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), KeepAlive)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/x"

    async def task() -> bytes:
        client = session()
        try:
            async with client.request("GET", url) as response:
                return await response.read()
        finally:
            await client.close()

    try:
        assert asyncio.run(task()) == b"[]"
        descriptors = len(os.listdir("/proc/self/fd"))
        for _ in range(30):
            assert asyncio.run(task()) == b"[]"
        assert len(os.listdir("/proc/self/fd")) <= descriptors + 1
    finally:
        server.shutdown()
        server.server_close()
    assert accepted == 1


@pytest.mark.parametrize("stalls_in", ["status line", "headers"])
async def test_an_answer_that_stalls_fails_after_the_read_timeout(
    raw_server: Callable[[Handler], Awaitable[str]], stalls_in: str
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if stalls_in == "headers":
            writer.write(b"HTTP/1.1 200 OK\r\n")
            await writer.drain()
        await asyncio.sleep(5)
        writer.close()

    url = await raw_server(handler)
    client = LiteSession({}, connect_timeout=5.0, read_timeout=0.2)
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(asyncio.TimeoutError):
            await client.send("GET", url + "/slow")
        assert asyncio.get_running_loop().time() - started < 4
    finally:
        await client.close()
