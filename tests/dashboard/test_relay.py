"""The `agl dashboard` relay to a remote store server: exact paths, decoded bodies, timeouts and dead servers."""

from __future__ import annotations

import socket
import threading

import pytest

import agentlightning as agl

starlette_testclient = pytest.importorskip("starlette.testclient")


def test_the_relay_keeps_a_percent_escaped_path_as_the_browser_sent_it(loop_thread) -> None:  # type: ignore[no-untyped-def]
    from agentlightning.dashboard.proxy import create_proxy_app
    from agentlightning.store.client_server import LightningStoreServer

    store = agl.InMemoryLightningStore()
    loop_thread.run(store.update_resources("v 1+2", {"main_llm": agl.LLM(endpoint="http://x", model="m")}))
    server = LightningStoreServer(store, port=0)
    loop_thread.run(server.start())
    try:
        with starlette_testclient.TestClient(create_proxy_app(server.endpoint)) as client:
            answer = client.get("/v1/agl/resources/v%201%2B2")
        assert answer.status_code == 200 and answer.json()["resources_id"] == "v 1+2"
    finally:
        loop_thread.run(server.stop())


def test_a_store_server_that_never_answers_is_a_504_naming_it() -> None:
    from agentlightning.dashboard.proxy import create_proxy_app

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()
    root = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        with starlette_testclient.TestClient(create_proxy_app(root, timeout_seconds=0.5)) as client:
            answer = client.get("/v1/agl/health")
        assert answer.status_code == 504
        assert answer.json() == {
            "detail": f"The store server at {root} did not answer in time",
            "error_type": "StoreTimeoutError",
        }
    finally:
        for sock in (*accepted, silent):
            sock.close()


def test_a_store_server_that_is_not_there_is_a_502_naming_it() -> None:
    from agentlightning.dashboard.proxy import create_proxy_app

    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    root = f"http://127.0.0.1:{free.getsockname()[1]}"
    free.close()
    with starlette_testclient.TestClient(create_proxy_app(root)) as client:
        answer = client.get("/v1/agl/health")
    assert answer.status_code == 502 and answer.json()["error_type"] == "StoreUnreachableError"
    assert root in answer.json()["detail"]
