"""Keyless loopback servers answer only requests addressed to this machine: a page using DNS rebinding (its own
host name resolving to 127.0.0.1) is refused by the Host check of each server."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import httpx
import pytest

from agentlightning.utils.hosts import ALLOWED_HOSTS_ENV, LoopbackHostGuard, guard_loopback, host_guard_needed

REBOUND = "attacker.example"


def get(url: str, host: Optional[str] = None, **headers: str) -> httpx.Response:
    """GET `url` with the Host header a browser sends for a page of `host` (with the URL's port)."""
    if host is not None:
        headers["host"] = f"{host}:{httpx.URL(url).port}"
    return httpx.get(url, headers=headers, timeout=10)


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def call(guard: LoopbackHostGuard, host: Optional[bytes]) -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"host", host)] if host is not None else []
    asyncio.run(guard({"type": "http", "headers": headers}, None, send))
    return sent[0]["status"], sent[1]["body"]


@pytest.mark.parametrize(
    "host", [b"localhost:4747", b"127.0.0.1:4747", b"127.0.0.2", b"[::1]:4747", b"LOCALHOST.", b"app.localhost:1"]
)
def test_names_of_this_machine_pass_with_any_port(host: bytes) -> None:
    assert call(LoopbackHostGuard(_ok), host)[0] == 200


def test_another_name_is_refused_with_how_to_allow_it() -> None:
    status, body = call(LoopbackHostGuard(_ok), b"attacker.example:4747")
    assert status == 403
    assert b"'attacker.example:4747' is refused" in body and b"AGL_ALLOWED_HOSTS=attacker.example" in body


def test_a_request_without_a_host_header_is_not_a_browsers_and_passes() -> None:
    assert call(LoopbackHostGuard(_ok), None)[0] == 200


def test_names_can_be_allowed_and_the_check_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "devbox, tunnel.internal")
    guarded = guard_loopback(_ok, "127.0.0.1", None)
    assert call(guarded, b"devbox:4747")[0] == 200 and call(guarded, b"tunnel.internal")[0] == 200
    assert call(guarded, b"attacker.example")[0] == 403
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "*")
    assert guard_loopback(_ok, "127.0.0.1", None) is _ok


def test_only_keyless_servers_on_loopback_check_hosts() -> None:
    assert all(host_guard_needed(host, key) for host, key in (("127.0.0.1", None), ("localhost", ""), ("::1", None)))
    assert not host_guard_needed("127.0.0.1", "key")  # the key protects it: a rebound page does not have it
    assert not host_guard_needed("0.0.0.0", None)  # a deliberate --insecure network server is reached by any name


async def test_the_store_server_and_its_dashboard_refuse_a_rebound_page() -> None:
    from agentlightning.store import InMemoryLightningStore, LightningStoreClient
    from agentlightning.store.client_server import LightningStoreServer

    server = LightningStoreServer(InMemoryLightningStore(), port=0)
    await server.start()
    try:
        root = server.endpoint
        assert get(f"{root}/v1/agl/rollouts", REBOUND).status_code == 403
        assert get(f"{root}/", REBOUND).status_code == 403
        assert get(f"{root}/v1/agl/rollouts").status_code == 200
        assert get(f"{root}/v1/agl/rollouts", "localhost").status_code == 200
        client = LightningStoreClient(root)  # the store's own clients still get through
        try:
            assert list(await client.query_rollouts()) == []
        finally:
            await client.close()
    finally:
        await server.stop()


async def test_a_store_server_with_a_key_is_left_to_its_key() -> None:
    from agentlightning.store import InMemoryLightningStore
    from agentlightning.store.client_server import LightningStoreServer

    server = LightningStoreServer(InMemoryLightningStore(), port=0, api_key="k")
    await server.start()
    try:
        answer = get(f"{server.endpoint}/v1/agl/rollouts", REBOUND, authorization="Bearer k")
        assert answer.status_code == 200
    finally:
        await server.stop()


def test_the_llm_proxy_refuses_a_rebound_page() -> None:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store import InMemoryLightningStore

    proxy = LLMProxy(model_list=[], store=InMemoryLightningStore(), port=0)
    proxy.start()
    try:
        root = proxy.endpoint.removesuffix("/v1")
        assert get(f"{root}/v1/models", REBOUND).status_code == 403
        assert get(f"{root}/v1/models").status_code == 200
    finally:
        proxy.stop()


def test_the_inference_server_refuses_a_rebound_page() -> None:
    pytest.importorskip("torch", reason="the inference server needs the inference extra")
    from agentlightning.inference.server import InferenceServer
    from agentlightning.inference.tiny import build_tiny_engine

    with InferenceServer(build_tiny_engine(seed=0)) as running:
        assert get(f"{running.endpoint}/models", REBOUND).status_code == 403
        assert get(f"{running.endpoint}/models").status_code == 200


def test_agl_dashboard_refuses_a_rebound_page() -> None:
    from agentlightning.dashboard.serve import dashboard_server_for

    server = dashboard_server_for("memory://")
    urls: list[str] = []

    async def serve() -> None:
        task = asyncio.create_task(server.serve("127.0.0.1", 0, urls.append))
        while not urls:
            await asyncio.sleep(0.01)
        try:
            answers = await asyncio.to_thread(lambda: (get(urls[0], REBOUND), get(urls[0])))
        finally:
            task.cancel()
        assert [answer.status_code for answer in answers] == [403, 200]

    asyncio.run(serve())


def test_the_workers_of_agl_store_check_hosts_when_keyless_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.testclient import TestClient

    from agentlightning.store.http.server.app import create_app_from_env

    monkeypatch.setenv("AGL_STORE_BACKEND", "memory://")
    monkeypatch.setenv("AGL_STORE_BIND_HOST", "127.0.0.1")
    monkeypatch.delenv("AGL_STORE_API_KEY", raising=False)

    def status(base_url: str) -> int:
        return TestClient(create_app_from_env(), base_url=base_url).get("/v1/agl/rollouts").status_code

    assert (status(f"http://{REBOUND}"), status("http://127.0.0.1:4747")) == (403, 200)
    monkeypatch.setenv("AGL_STORE_BIND_HOST", "0.0.0.0")
    assert status(f"http://{REBOUND}") == 200
