"""Bad requests get the right 4xx JSON answer naming the problem, and the server keeps serving."""

from __future__ import annotations

import gzip
import socket
import time

import pytest

from agentlightning.store.client_server import LightningStoreServer

from .conftest import call, start_server, stop_server

ENQUEUE = "/v1/agl/queues/rollouts/enqueue"


def _alive(server: LightningStoreServer) -> None:
    answer = call(server, "POST", ENQUEUE, {"rollouts": [{"input": "still serving"}]})
    assert answer.status == 201, answer.body


def test_malformed_json_gets_422_naming_the_problem(server: LightningStoreServer) -> None:
    answer = call(server, "POST", ENQUEUE, raw=b'{"rollouts": [')
    assert answer.status == 422
    assert answer.json["error_type"] == "InvalidArgumentError"
    assert "Invalid JSON" in answer.json["detail"] or "EOF" in answer.json["detail"]
    _alive(server)


def test_a_missing_required_field_gets_422(server: LightningStoreServer) -> None:
    answer = call(server, "POST", ENQUEUE, {})
    assert answer.status == 422
    assert "rollouts" in answer.json["detail"] and "Field required" in answer.json["detail"]


def test_a_wrong_type_gets_422_with_a_type_error(server: LightningStoreServer) -> None:
    answer = call(server, "POST", "/v1/agl/queues/rollouts/dequeue", {"limit": "2"})
    assert answer.status == 422
    assert answer.json["error_type"] == "InvalidArgumentTypeError"
    assert "limit" in answer.json["detail"]
    assert answer.json["errors"][0]["loc"] == ["limit"]


def test_an_unknown_field_is_rejected_not_ignored(server: LightningStoreServer) -> None:
    answer = call(server, "POST", "/v1/agl/queues/rollouts/dequeue", {"limit": 1, "wroker_id": "w"})
    assert answer.status == 422
    assert "wroker_id" in answer.json["detail"]


def test_an_illegal_value_gets_422_naming_the_value(server: LightningStoreServer) -> None:
    rollout = call(server, "POST", ENQUEUE, {"rollouts": [{"input": 1}]}).json[0]
    answer = call(server, "POST", f"/v1/agl/rollouts/{rollout['rollout_id']}", {"status": "bogus"})
    assert answer.status == 422
    assert "bogus" in answer.json["detail"]


def test_a_store_argument_error_gets_400(server: LightningStoreServer) -> None:
    answer = call(server, "POST", "/v1/agl/rollouts/search", {"sort_by": "input"})
    assert answer.status == 400
    assert answer.json == {
        "detail": answer.json["detail"],
        "error_type": "InvalidArgumentError",
    }
    assert answer.json["detail"].startswith("Invalid sort_by: input")


def test_an_unknown_rollout_gets_404_with_its_id(server: LightningStoreServer) -> None:
    answer = call(server, "POST", "/v1/agl/rollouts/ro-missing", {"status": "failed"})
    assert answer.status == 404
    assert answer.json["error_type"] == "RolloutNotFoundError"
    assert answer.json["detail"] == "Rollout ro-missing not found"
    assert answer.json["context"] == {"rollout_id": "ro-missing"}


def test_an_attempt_update_before_any_attempt_gets_409(server: LightningStoreServer) -> None:
    rollout = call(server, "POST", ENQUEUE, {"rollouts": [{"input": 1}]}).json[0]
    answer = call(server, "POST", f"/v1/agl/rollouts/{rollout['rollout_id']}/attempts/latest", {"status": "failed"})
    assert answer.status == 409
    assert answer.json["error_type"] == "NoAttemptsError"


def test_reads_of_unknown_ids_answer_null(server: LightningStoreServer) -> None:
    answer = call(server, "GET", "/v1/agl/rollouts/ro-missing")
    assert answer.status == 200 and answer.json is None


def test_an_unknown_route_gets_a_json_404(server: LightningStoreServer) -> None:
    answer = call(server, "GET", "/v1/agl/nothing-here")
    assert answer.status == 404
    assert answer.json["error_type"] == "NotFound"


def test_a_wrong_method_gets_a_json_405(server: LightningStoreServer) -> None:
    answer = call(server, "DELETE", "/v1/agl/rollouts/search")
    assert answer.status == 405
    assert answer.json["error_type"] == "MethodNotAllowed"


def test_a_body_on_a_get_route_is_rejected(server: LightningStoreServer) -> None:
    answer = call(server, "GET", "/v1/agl/statistics", raw=b'{"x": 1}')
    assert answer.status == 400


def test_an_oversized_body_gets_413_before_it_is_read() -> None:
    server = start_server(max_body_bytes=1024)
    try:
        answer = call(server, "POST", ENQUEUE, {"rollouts": [{"input": "x" * 4096}]})
        assert answer.status == 413
        assert answer.json["error_type"] == "RequestTooLargeError"
        _alive(server)
    finally:
        stop_server(server)


def test_an_oversized_chunked_body_gets_413() -> None:
    server = start_server(max_body_bytes=1024)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            head = f"POST {ENQUEUE} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
            chunk = b"x" * 800
            sock.sendall(head + b"%x\r\n%s\r\n" % (len(chunk), chunk) * 3)
            reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 413")
        _alive(server)
    finally:
        stop_server(server)


def test_a_gzip_bomb_is_stopped_at_the_limit() -> None:
    server = start_server(max_body_bytes=64 * 1024)
    try:
        bomb = gzip.compress(b'{"rollouts": [{"input": "' + b"a" * 10_000_000 + b'"}]}')
        assert len(bomb) < 64 * 1024
        answer = call(server, "POST", ENQUEUE, raw=bomb, headers={"Content-Encoding": "gzip"})
        assert answer.status == 413
        _alive(server)
    finally:
        stop_server(server)


def test_a_gzip_body_is_accepted(server: LightningStoreServer) -> None:
    body = gzip.compress(b'{"rollouts": [{"input": 1}, {"input": 2}]}')
    answer = call(server, "POST", ENQUEUE, raw=body, headers={"Content-Encoding": "gzip"})
    assert answer.status == 201 and len(answer.json) == 2


def test_an_unsupported_encoding_gets_415(server: LightningStoreServer) -> None:
    answer = call(server, "POST", ENQUEUE, raw=b"{}", headers={"Content-Encoding": "br"})
    assert answer.status == 415


def test_a_stalled_sender_gets_408_while_others_are_served() -> None:
    from agentlightning.store import InMemoryLightningStore
    from agentlightning.store.http.server.app import ServerSettings
    from agentlightning.store.http.server.handlers import ServerLimits

    settings = ServerSettings(limits=ServerLimits(body_timeout_seconds=0.5))
    server = start_server(InMemoryLightningStore(), settings=settings)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(f"POST {ENQUEUE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{{".encode())
            started = time.monotonic()
            _alive(server)  # another client is served while this one stalls
            reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 408")
        assert time.monotonic() - started < 10
    finally:
        stop_server(server)


def test_a_vanished_client_does_not_lose_its_write(server: LightningStoreServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        body = b'{"rollouts": [{"input": "fire and forget"}]}'
        sock.sendall(
            f"POST {ENQUEUE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
        )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        items = call(server, "GET", "/v1/agl/rollouts").json["items"]
        if items:
            break
        time.sleep(0.02)
    assert [item["input"] for item in items] == ["fire and forget"]
    _alive(server)


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/agl/rollouts", {"input": 1, "mode": "fit"}),
        ("POST", "/v1/agl/rollouts", {"input": 1, "config": {"max_attempts": 0}}),
        ("POST", "/v1/agl/rollouts", {"input": 1, "metadata": [1]}),
        ("POST", "/v1/agl/spans", {"rollout_id": "r"}),
        ("POST", "/v1/agl/spans/next", {"rollout_id": 1, "attempt_id": "a"}),
        ("POST", "/v1/agl/resources", {"llm": {"resource_type": "rocket"}}),
        ("POST", "/v1/agl/waits/rollouts", {"rollout_ids": "ro-1"}),
    ],
)
def test_invalid_bodies_get_422(server: LightningStoreServer, method: str, path: str, body: object) -> None:
    answer = call(server, method, path, body)
    assert answer.status == 422, answer.body
    assert answer.json["error_type"] in ("InvalidArgumentError", "InvalidArgumentTypeError")


def _started(server: LightningStoreServer) -> tuple[str, str]:
    answer = call(server, "POST", "/v1/agl/rollouts", {"input": 1})
    assert answer.status == 201, answer.body
    return answer.json["rollout_id"], answer.json["attempt"]["attempt_id"]


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("/v1/agl/rollouts/{rollout_id}", {"status": None}, "status"),
        ("/v1/agl/rollouts/{rollout_id}", {"config": None}, "config"),
        ("/v1/agl/rollouts/{rollout_id}/attempts/{attempt_id}", {"status": None}, "status"),
        ("/v1/agl/workers/w1", {"heartbeat_stats": None}, "heartbeat_stats"),
    ],
)
def test_an_explicit_null_for_a_field_that_cannot_be_null_is_a_400_naming_it(
    server: LightningStoreServer, path: str, body: dict[str, object], field: str
) -> None:
    rollout_id, attempt_id = _started(server)
    answer = call(server, "POST", path.format(rollout_id=rollout_id, attempt_id=attempt_id), body)
    assert answer.status == 400, answer.body
    assert answer.json["error_type"] == "InvalidArgumentTypeError"  # an InvalidArgumentError, as from the store
    assert answer.json["detail"].startswith(f"{field} cannot be null")
    # leaving the field out is a valid no-op update
    assert call(server, "POST", path.format(rollout_id=rollout_id, attempt_id=attempt_id), {}).status == 200


@pytest.mark.parametrize(
    "path, body, location",
    [
        ("/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1, "config": {"max_attempt": 3}}]}, "max_attempt"),
        ("/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1, "mod": "train"}]}, "mod"),
        ("/v1/agl/rollouts", {"input": 1, "config": {"timeout_second": 3}}, "timeout_second"),
        (
            "/v1/agl/resources",
            {"llm": {"resource_type": "llm", "endpoint": "http://x", "model": "m", "tempo": 1}},
            "tempo",
        ),
        (
            "/v1/agl/ops/add_resources",
            {"resources": {"llm": {"resource_type": "llm", "endpoint": "http://x", "model": "m", "tempo": 1}}},
            "tempo",
        ),
    ],
)
def test_unknown_fields_inside_nested_bodies_get_422(
    server: LightningStoreServer, path: str, body: dict[str, object], location: str
) -> None:
    answer = call(server, "POST", path, body)
    assert answer.status == 422, answer.body
    assert location in answer.json["detail"]
    assert call(server, "GET", "/v1/agl/rollouts").json["total"] == 0  # nothing was applied


def test_an_unknown_field_of_a_span_resource_gets_422_while_span_extras_are_kept(
    server: LightningStoreServer,
) -> None:
    from agentlightning.types import Span

    rollout_id, attempt_id = _started(server)
    span = Span.from_attributes(attributes={}, rollout_id=rollout_id, attempt_id=attempt_id).model_dump(mode="json")
    span["custom"] = "kept"
    bad = {**span, "resource": {**span["resource"], "schema_ur": "x"}}
    answer = call(server, "POST", "/v1/agl/spans", bad)
    assert answer.status == 422 and "schema_ur" in answer.json["detail"], answer.body
    answer = call(server, "POST", "/v1/agl/spans", span)
    assert answer.status == 201, answer.body
    assert answer.json["custom"] == "kept"


def test_a_span_sequence_id_beyond_2_to_the_53_gets_422_naming_the_field(server: LightningStoreServer) -> None:
    from agentlightning.types import Span

    rollout = call(server, "POST", "/v1/agl/rollouts", {"input": "task"}).json
    ids = {"rollout_id": rollout["rollout_id"], "attempt_id": rollout["attempt"]["attempt_id"]}
    span = Span.from_attributes(attributes={}, sequence_id=1, name="step", **ids).model_dump(mode="json")
    for sequence_id in (2**63 - 1, 2**64):
        answer = call(server, "POST", "/v1/agl/spans", {**span, "sequence_id": sequence_id})
        assert answer.status == 422, answer.body
        assert "span.sequence_id" in answer.json["detail"] and "9007199254740991" in answer.json["detail"]
    next_id = call(server, "POST", "/v1/agl/spans/next", ids)
    assert next_id.status == 200 and next_id.json == {"sequence_id": 1}


def test_a_limit_beyond_64_bits_gets_422_naming_the_field(server: LightningStoreServer) -> None:
    for path, body in (
        ("/v1/agl/rollouts/search", {"limit": 2**64}),
        ("/v1/agl/queues/rollouts/dequeue", {"limit": 2**63}),
    ):
        answer = call(server, "POST", path, body)
        assert answer.status == 422, answer.body
        assert "limit" in answer.json["detail"]


def test_nan_in_an_input_and_an_infinite_timeout_get_400_naming_the_field(server: LightningStoreServer) -> None:
    answer = call(server, "POST", ENQUEUE, raw=b'{"rollouts": [{"input": {"score": NaN}}]}')
    assert answer.status == 400, answer.body
    assert "input.score" in answer.json["detail"] and "NaN" in answer.json["detail"]
    raw = b'{"rollouts": [{"input": "task", "config": {"timeout_seconds": 1e400}}]}'
    answer = call(server, "POST", ENQUEUE, raw=raw)
    assert answer.status == 400, answer.body
    assert "timeout_seconds" in answer.json["detail"] and "finite" in answer.json["detail"]
    assert call(server, "GET", "/v1/agl/rollouts").json["items"] == []
