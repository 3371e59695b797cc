"""Deciding from an error's structure whether an upstream supports `return_token_ids`, warning when token-id capture
turns off, and asking again later."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not installed")

from agentlightning.llm_proxy.token_id_support import TokenIdSupport, rejects_return_token_ids  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402

from .conftest import MESSAGES, client_for, rollout, spans_of, start_proxy  # noqa: E402
from .fake_upstream import FakeUpstream  # noqa: E402

OPENAI_REJECTION = {
    "error": {
        "message": "Unrecognized request argument supplied: return_token_ids",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
VLLM_BAD_SEED = {
    "error": {
        "message": "[{'type': 'int_parsing', 'loc': ('body', 'seed'), 'msg': 'bad', 'input': 'return_token_ids'}]",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}


@pytest.mark.parametrize(
    "status, body",
    [
        (400, OPENAI_REJECTION),
        (400, {"error": {"message": "Unrecognized request arguments supplied: foo, return_token_ids"}}),
        (400, {"error": {"message": "invalid", "param": "return_token_ids"}}),
        (422, {"detail": [{"type": "extra_forbidden", "loc": ["body", "return_token_ids"], "msg": "Extra inputs"}]}),
        (400, {"detail": [{"loc": ["body", "return_token_ids"], "msg": "extra fields", "type": "value_error.extra"}]}),
        (400, {"message": "[{'type': 'extra_forbidden', 'loc': ('body', 'return_token_ids'), 'input': True}]"}),
        (400, "Unrecognized request argument supplied: return_token_ids"),
    ],
)
def test_structured_rejections_of_the_field_are_recognised(status: int, body: Any) -> None:
    raw = body if isinstance(body, str) else json.dumps(body)
    assert rejects_return_token_ids(status, raw.encode())


@pytest.mark.parametrize(
    "status, body",
    [
        (400, VLLM_BAD_SEED),  # the text appears only as an echoed value
        (400, {"error": {"message": "Unrecognized request argument supplied: return_token_ids_v2"}}),
        (400, {"error": {"message": "Unrecognized request argument supplied: foo"}}),
        (422, {"detail": [{"type": "bool_parsing", "loc": ["body", "return_token_ids"], "msg": "not a bool"}]}),
        (422, {"detail": [{"type": "extra_forbidden", "loc": ["body", "return_token_ids", "x"], "msg": "extra"}]}),
        (500, OPENAI_REJECTION),  # not a rejection of the request's shape
        (400, "prompt too long; return_token_ids"),
    ],
)
def test_errors_that_merely_mention_the_field_are_not_rejections(status: int, body: Any) -> None:
    raw = body if isinstance(body, str) else json.dumps(body)
    assert not rejects_return_token_ids(status, raw.encode())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_refusing_server_is_asked_again_after_the_reprobe_interval_which_doubles() -> None:
    clock = Clock()
    support = TokenIdSupport(reprobe_after=10, max_reprobe_after=15, clock=clock)
    support.rejected("http://u")
    assert not support.wanted("http://u") and support.refused() == {"http://u": 10}
    clock.now += 10
    assert support.wanted("http://u")
    support.rejected("http://u")  # still refusing: wait longer, up to the cap
    assert support.refused() == {"http://u": 15}
    clock.now += 15
    assert support.wanted("http://u")
    support.accepted("http://u")
    assert support.refused() == {} and support.wanted("http://u")


def test_a_refusing_upstream_is_asked_again_without_the_field_and_the_warning_is_loud(
    upstream: FakeUpstream, store: InMemoryLightningStore, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.script.token_id_error = "openai"
    proxy = start_proxy(upstream, store)
    try:
        attempted = rollout(store)
        client = client_for(proxy, attempted)
        with caplog.at_level(logging.WARNING, logger="agentlightning.llm_proxy"):
            assert client.chat.completions.create(model="fake", messages=MESSAGES).choices[0].message.content == "pong"
        assert "TOKEN-ID CAPTURE IS OFF" in caplog.text and upstream.api_base in caplog.text
        client.chat.completions.create(model="fake", messages=MESSAGES)
        assert ["return_token_ids" in request for request in upstream.script.requests] == [True, False, False]
        assert list(proxy.token_id_refusals()) == [upstream.api_base]
        spans = spans_of(proxy, store, attempted)
        assert [span.status.status_code for span in spans] == ["OK", "OK"]
        assert all("prompt_token_ids" not in span.attributes for span in spans)
    finally:
        proxy.stop()


def test_an_upstream_rejecting_the_field_as_a_validation_error_is_also_recognised(
    upstream: FakeUpstream, store: InMemoryLightningStore
) -> None:
    upstream.script.token_id_error = "pydantic"
    proxy = start_proxy(upstream, store)
    try:
        reply = client_for(proxy, rollout(store)).completions.create(model="fake", prompt="abc")
        assert reply.choices[0].text == "pong"
        assert ["return_token_ids" in request for request in upstream.script.requests] == [True, False]
    finally:
        proxy.stop()


def test_an_error_that_echoes_the_field_name_reaches_the_agent_and_capture_stays_on(
    upstream: FakeUpstream, store: InMemoryLightningStore
) -> None:
    upstream.script.token_id_error = "echo"
    proxy = start_proxy(upstream, store)
    try:
        client = client_for(proxy, rollout(store))
        with pytest.raises(openai.BadRequestError, match="int_parsing"):
            client.chat.completions.create(model="fake", messages=MESSAGES, seed="return_token_ids")  # type: ignore[arg-type]
        client.chat.completions.create(model="fake", messages=MESSAGES)
        assert ["return_token_ids" in request for request in upstream.script.requests] == [True, True]
        assert proxy.token_id_refusals() == {}
    finally:
        proxy.stop()


def test_the_proxy_asks_a_refusing_upstream_again_later(
    upstream: FakeUpstream, store: InMemoryLightningStore, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.script.token_id_error = "openai"
    proxy = start_proxy(upstream, store, token_id_reprobe_after=0.2)
    try:
        client = client_for(proxy, rollout(store))
        client.chat.completions.create(model="fake", messages=MESSAGES)
        time.sleep(0.25)  # past the re-probe time (monotonic clock: at least this much has passed)
        upstream.script.token_id_error = None  # the upstream was upgraded meanwhile
        with caplog.at_level(logging.WARNING, logger="agentlightning.llm_proxy"):
            client.chat.completions.create(model="fake", messages=MESSAGES)
        assert ["return_token_ids" in request for request in upstream.script.requests] == [True, False, True]
        assert "token-id capture is back on" in caplog.text and proxy.token_id_refusals() == {}
    finally:
        proxy.stop()
