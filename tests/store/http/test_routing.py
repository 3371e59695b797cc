"""The two routings of store operations (the dispatcher in front of FastAPI, or Starlette's router inside it) answer
the same requests the same, on one store."""

from __future__ import annotations

from typing import Any, Optional

import httpx
import pytest

from agentlightning.store import InMemoryLightningStore, LightningStore
from agentlightning.store.http.server.app import ServerSettings, create_app

ROUTINGS = ("dispatcher", "starlette")
PER_REQUEST_HEADERS = {"server-timing", "x-agl-server-time"}
"""Headers that differ from one request to the next, whatever the routing."""


async def _answers(
    store: LightningStore,
    method: str,
    path: str,
    body: Any = None,
    settings: Optional[ServerSettings] = None,
) -> dict[str, tuple[int, bytes, dict[str, str]]]:
    """(status, body, headers but the per-request ones) of one request, by routing."""
    answers: dict[str, tuple[int, bytes, dict[str, str]]] = {}
    for routing in ROUTINGS:
        transport = httpx.ASGITransport(app=create_app(store, settings, _routing=routing))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.request(method, path, json=body)
        headers = {key: value for key, value in response.headers.items() if key not in PER_REQUEST_HEADERS}
        answers[routing] = (response.status_code, response.content, headers)
    return answers


def _same(answers: dict[str, tuple[int, bytes, dict[str, str]]]) -> tuple[int, bytes, dict[str, str]]:
    assert answers["starlette"] == answers["dispatcher"]
    return answers["dispatcher"]


async def test_an_operation_gets_its_path_param_with_either_routing() -> None:
    store = InMemoryLightningStore()
    rollout = await store.enqueue_rollout({"question": "1+1"})
    status, body, _ = _same(await _answers(store, "GET", f"/v1/agl/rollouts/{rollout.rollout_id}"))
    assert status == 200 and rollout.rollout_id.encode() in body


async def test_literal_segments_win_over_a_path_param_with_either_routing() -> None:
    status, body, _ = _same(await _answers(InMemoryLightningStore(), "POST", "/v1/agl/rollouts/search", {}))
    assert status == 200 and b'"total":0' in body


async def test_an_unknown_path_under_the_prefix_gets_the_same_json_404() -> None:
    status, body, _ = _same(await _answers(InMemoryLightningStore(), "GET", "/v1/agl/nothing-here"))
    assert status == 404 and b'"error_type":"NotFound"' in body


async def test_a_store_path_with_a_trailing_slash_gets_the_same_json_404() -> None:
    status, _, _ = _same(await _answers(InMemoryLightningStore(), "GET", "/v1/agl/rollouts/"))
    assert status == 404


async def test_a_wrong_method_gets_the_same_json_405_without_an_allow_header() -> None:
    status, body, headers = _same(await _answers(InMemoryLightningStore(), "DELETE", "/v1/agl/rollouts/search"))
    assert status == 405 and b'"error_type":"MethodNotAllowed"' in body
    assert "allow" not in headers


async def test_head_on_a_get_operation_gets_the_same_405() -> None:
    status, _, _ = _same(await _answers(InMemoryLightningStore(), "HEAD", "/v1/agl/statistics"))
    assert status == 405


@pytest.mark.parametrize("path", ["/v1/agl/health", "/v1/agl/openapi.json", "/v1/agl/docs"])
async def test_a_path_outside_the_operations_gets_the_same_answer(path: str) -> None:
    status, _, _ = _same(await _answers(InMemoryLightningStore(), "GET", path))
    assert status == 200


async def test_the_key_check_stays_in_front_of_either_routing() -> None:
    settings = ServerSettings(api_key="secret")
    status, _, headers = _same(await _answers(InMemoryLightningStore(), "GET", "/v1/agl/statistics", None, settings))
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")


def test_an_unknown_routing_is_refused() -> None:
    with pytest.raises(ValueError, match="routing"):
        create_app(InMemoryLightningStore(), _routing="linear")
