"""The proxy's upstream client: which answers are retried, and that a Retry-After header is waited for."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from agentlightning.llm_proxy.models import Upstream
from agentlightning.llm_proxy.upstream import UpstreamClient


class ScriptedServer:
    """Answers POST /v1/chat/completions with the scripted (status, headers) pairs, then 200; records arrival times."""

    def __init__(self, *answers: tuple[int, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.arrivals: list[float] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.arrivals.append(time.monotonic())
        if self.answers:
            status, headers = self.answers.pop(0)
            return web.json_response({"error": "scripted"}, status=status, headers=headers)
        return web.json_response({"ok": True})


@pytest.fixture
async def served() -> AsyncIterator[tuple[ScriptedServer, Upstream]]:
    server = ScriptedServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    await web.SockSite(runner, sock).start()
    upstream = Upstream("m", f"http://127.0.0.1:{port}/v1", "m", None, True, {})
    try:
        yield server, upstream
    finally:
        await runner.cleanup()


async def test_a_retry_after_header_is_waited_for(served: tuple[ScriptedServer, Upstream]) -> None:
    server, upstream = served
    server.answers = [(429, {"Retry-After": "0.4"})]
    client = UpstreamClient(num_retries=1, timeout=5.0)
    try:
        result = await client.send(upstream, "/chat/completions", {"model": "m"})
        assert result.response is not None and result.response.status_code == 200 and result.attempts == 2
        await result.response.close()
    finally:
        await client.close()
    # Without the header the first wait is at most 0.1 s.
    assert server.arrivals[1] - server.arrivals[0] >= 0.4


async def test_the_last_retryable_answer_is_returned_to_the_caller(served: tuple[ScriptedServer, Upstream]) -> None:
    server, upstream = served
    server.answers = [(503, {}), (503, {})]
    client = UpstreamClient(num_retries=1, timeout=5.0)
    try:
        result = await client.send(upstream, "/chat/completions", {"model": "m"})
        assert result.response is not None and result.response.status_code == 503 and result.attempts == 2
        assert b"scripted" in await result.response.read()
        await result.response.close()
    finally:
        await client.close()


async def test_a_client_error_is_not_retried(served: tuple[ScriptedServer, Upstream]) -> None:
    server, upstream = served
    server.answers = [(400, {})]
    client = UpstreamClient(num_retries=3, timeout=5.0)
    try:
        result = await client.send(upstream, "/chat/completions", {"model": "m"})
        assert result.response is not None and result.response.status_code == 400 and result.attempts == 1
        await result.response.close()
    finally:
        await client.close()
    assert len(server.arrivals) == 1
