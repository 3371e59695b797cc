"""Who may use the LLM proxy: off loopback it needs an API key (or an explicit `insecure=True`), and the key check
cannot be bypassed by header case, path tricks or methods. Requests are sent over real sockets, byte for byte."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

from agentlightning.llm_proxy import LLMProxy  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402

from .conftest import MESSAGES, client_for, rollout, spans_of, start_proxy  # noqa: E402
from .fake_upstream import FakeUpstream  # noqa: E402

KEY = "s3cret-key"


def raw_request(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, bytes]:
    """Send one HTTP/1.1 request exactly as written (no client-side path normalisation); returns status and body."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), payload


@pytest.fixture
def keyed_proxy(upstream: FakeUpstream, store: InMemoryLightningStore) -> Iterator[LLMProxy]:
    proxy = start_proxy(upstream, store, api_key=KEY)
    yield proxy
    proxy.stop()


def chat_body() -> bytes:
    return json.dumps({"model": "fake", "messages": MESSAGES}).encode()


def test_a_non_loopback_address_without_a_key_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'0\.0\.0\.0' without an API key.*insecure=True"):
        LLMProxy(model_list=[], bind_host="0.0.0.0")
    with pytest.raises(ValueError, match="without an API key"):
        LLMProxy(model_list=[], bind_host="10.1.2.3")


def test_a_non_loopback_address_is_allowed_with_a_key_or_an_explicit_insecure_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert LLMProxy(model_list=[], bind_host="0.0.0.0", api_key=KEY).api_key == KEY
    assert LLMProxy(model_list=[], bind_host="0.0.0.0", insecure=True).api_key is None
    monkeypatch.setenv("AGL_PROXY_API_KEY", "from-env")
    assert LLMProxy(model_list=[], bind_host="0.0.0.0").api_key == "from-env"


def test_start_checks_the_rule_again_when_the_bind_address_changed(store: InMemoryLightningStore) -> None:
    proxy = LLMProxy(model_list=[], store=store)
    proxy.bind_host = "0.0.0.0"
    with pytest.raises(ValueError, match="without an API key"):
        proxy.start()
    assert not proxy.is_running()


def test_calls_without_the_key_are_refused_and_not_forwarded(
    keyed_proxy: LLMProxy, store: InMemoryLightningStore, upstream: FakeUpstream
) -> None:
    attempted = rollout(store)
    path = f"/rollout/{attempted.rollout_id}/attempt/{attempted.attempt.attempt_id}/v1/chat/completions"
    status, payload = raw_request(keyed_proxy.port, "POST", path, {"Content-Type": "application/json"}, chat_body())
    assert status == 401 and json.loads(payload)["error"]["code"] == "invalid_api_key"
    status, _ = raw_request(keyed_proxy.port, "POST", path, {"Authorization": "Bearer wrong"}, chat_body())
    assert status == 401
    assert upstream.script.requests == [] and spans_of(keyed_proxy, store, attempted) == []


def test_the_resource_carries_the_key_and_agents_using_it_get_through(
    keyed_proxy: LLMProxy, store: InMemoryLightningStore
) -> None:
    assert keyed_proxy.as_resource().api_key == KEY
    attempted = rollout(store)
    reply = client_for(keyed_proxy, attempted).chat.completions.create(model="fake", messages=MESSAGES)
    assert reply.choices[0].message.content == "pong" and len(spans_of(keyed_proxy, store, attempted)) == 1
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{keyed_proxy.endpoint}/v1", api_key="wrong", max_retries=0).models.list()


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {KEY}"},
        {"authorization": f"bearer {KEY}"},
        {"AUTHORIZATION": f"BEARER  {KEY}"},
        {"X-Api-Key": KEY},
    ],
)
def test_the_key_is_accepted_whatever_the_header_case(keyed_proxy: LLMProxy, headers: dict[str, str]) -> None:
    assert raw_request(keyed_proxy.port, "GET", "/v1/models", headers)[0] == 200


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/v1/models"),
        ("OPTIONS", "/v1/chat/completions"),
        ("OPTIONS", "/health"),
        ("POST", "/health"),
        ("GET", "/health/../v1/models"),
        ("GET", "/health%2F..%2Fv1/models"),
        ("GET", "//v1/models"),
        ("GET", "/v1/models?next=/health"),
        ("GET", "/HEALTH"),
        ("GET", "/rollout/r/attempt/a/v1/models"),
        ("POST", "/v1/chat/completions"),
    ],
)
def test_no_method_or_path_gets_past_the_key_check(keyed_proxy: LLMProxy, method: str, path: str) -> None:
    status, _ = raw_request(keyed_proxy.port, method, path, {"x-rollout-id": "r", "x-attempt-id": "a"}, chat_body())
    assert status == 401


def test_health_stays_open_for_probes(keyed_proxy: LLMProxy) -> None:
    status, payload = raw_request(keyed_proxy.port, "GET", "/health", {})
    assert status == 200 and json.loads(payload) == {"status": "ok"}
