"""OTLP/HTTP trace ingest (real exporter, JSON, gzip, partial rejection) and Prometheus metrics."""

from __future__ import annotations

import gzip
import json

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agentlightning.types import SpanNames

from .conftest import call, start_server_async

ROLLOUT = SpanNames.ROLLOUT_ID.value
ATTEMPT = SpanNames.ATTEMPT_ID.value
SEQUENCE = SpanNames.SPAN_SEQUENCE_ID.value


def _provider(endpoint: str, resource: dict[str, str], headers: dict[str, str] | None = None) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, headers=headers)))
    return provider


async def test_the_otlp_exporter_feeds_the_store() -> None:
    server = await start_server_async(api_key="otlp-key")
    try:
        started = await server.start_rollout("task")
        provider = _provider(
            server.otlp_traces_endpoint(),
            {ROLLOUT: started.rollout_id, ATTEMPT: started.attempt.attempt_id, "service.name": "agent"},
            headers={"Authorization": "Bearer otlp-key"},
        )
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("agent.run") as parent:
            parent.set_attribute("reward", 0.5)
            with tracer.start_as_current_span("llm.call", attributes={"tokens": [1, 2, 3]}):
                pass
        provider.shutdown()
        spans = await server.query_spans(started.rollout_id)
        assert [s.name for s in spans] == ["llm.call", "agent.run"]
        assert [s.sequence_id for s in spans] == [1, 2]
        child, root = spans
        assert child.parent_id == root.span_id and child.trace_id == root.trace_id
        assert child.attributes["tokens"] == [1, 2, 3] and root.attributes["reward"] == 0.5
        assert root.resource.attributes["service.name"] == "agent"
        assert root.start_time is not None and root.end_time is not None and root.end_time >= root.start_time
        rollout = await server.get_rollout_by_id(started.rollout_id)
        assert rollout is not None and rollout.status == "running"
    finally:
        await server.stop()


async def test_spans_of_unknown_rollouts_are_rejected_and_the_rest_stored() -> None:
    server = await start_server_async()
    try:
        started = await server.start_rollout("task")
        good = _provider(
            server.otlp_traces_endpoint(), {ROLLOUT: started.rollout_id, ATTEMPT: started.attempt.attempt_id}
        )
        bad = _provider(server.otlp_traces_endpoint(), {ROLLOUT: "ro-unknown", ATTEMPT: "at-unknown"})
        with good.get_tracer("t").start_as_current_span("kept"):
            pass
        with bad.get_tracer("t").start_as_current_span("dropped"):
            pass
        good.shutdown()
        bad.shutdown()
        assert [s.name for s in await server.query_spans(started.rollout_id)] == ["kept"]
    finally:
        await server.stop()


def _json_export(rollout_id: str, attempt_id: str, names: list[str], sequence: bool = False) -> dict:  # type: ignore[type-arg]
    spans = []
    for index, name in enumerate(names):
        attributes = [{"key": "idx", "value": {"intValue": str(index)}}]
        if sequence:
            attributes.append({"key": SEQUENCE, "value": {"intValue": str(100 + index)}})
        spans.append(
            {
                "traceId": "5b8efff798038103d269b633813fc60c",
                "spanId": f"eee19b7ec3c1b17{index}",
                "parentSpanId": "",
                "name": name,
                "kind": 1,
                "startTimeUnixNano": "1700000000000000000",
                "endTimeUnixNano": "1700000001000000000",
                "attributes": attributes,
                "status": {"code": 2, "message": "boom"},
                "events": [{"name": "exception", "timeUnixNano": "1700000000500000000", "attributes": []}],
            }
        )
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": ROLLOUT, "value": {"stringValue": rollout_id}},
                        {"key": ATTEMPT, "value": {"stringValue": attempt_id}},
                    ]
                },
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }


async def test_a_json_export_with_sequence_ids_is_stored() -> None:
    server = await start_server_async()
    try:
        started = await server.start_rollout("task")
        body = _json_export(started.rollout_id, started.attempt.attempt_id, ["a", "b"], sequence=True)
        answer = call(server, "POST", "/v1/traces", body)
        assert answer.status == 200 and answer.json == {}
        spans = await server.query_spans(started.rollout_id)
        assert [(s.name, s.sequence_id) for s in spans] == [("a", 100), ("b", 101)]
        first = spans[0]
        assert first.trace_id == "5b8efff798038103d269b633813fc60c" and first.span_id == "eee19b7ec3c1b170"
        assert first.status.status_code == "ERROR" and first.status.description == "boom"
        assert first.start_time == 1700000000.0 and first.events[0].timestamp == 1700000000.5
        assert first.attributes["idx"] == 0
    finally:
        await server.stop()


async def test_a_gzip_json_export_reports_spans_without_ids_as_rejected() -> None:
    server = await start_server_async()
    try:
        body = _json_export("", "", ["orphan"])
        answer = call(
            server,
            "POST",
            "/v1/traces",
            raw=gzip.compress(json.dumps(body).encode()),
            headers={"Content-Encoding": "gzip"},
        )
        assert answer.status == 200
        assert answer.json["partialSuccess"]["rejectedSpans"] == "1"
        assert ROLLOUT in answer.json["partialSuccess"]["errorMessage"]
    finally:
        await server.stop()


async def test_bad_otlp_bodies_get_4xx() -> None:
    server = await start_server_async()
    try:
        assert (
            call(
                server, "POST", "/v1/traces", raw=b"\xff\xff\xff", headers={"Content-Type": "application/x-protobuf"}
            ).status
            == 400
        )
        assert call(server, "POST", "/v1/traces", raw=b"{not json").status == 400
        assert call(server, "POST", "/v1/traces", raw=b"x", headers={"Content-Type": "text/plain"}).status == 415
        bad_id = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "00"}]}]}]}
        assert call(server, "POST", "/v1/traces", bad_id).status == 400
        for path in ("/v1/metrics", "/v1/logs"):
            assert call(server, "POST", path, {}).status == 501
    finally:
        await server.stop()


async def test_metrics_report_latency_queue_depth_and_statuses() -> None:
    server = await start_server_async()
    try:
        await server.enqueue_rollout("a")
        await server.enqueue_rollout("b")
        call(server, "POST", "/v1/agl/queues/rollouts/dequeue", {"worker_id": "w"})
        answer = call(server, "GET", "/v1/agl/metrics")
        text = answer.body.decode()
        assert answer.status == 200
        assert "agl_store_queue_depth 1.0" in text
        assert 'agl_store_rollouts{status="preparing"} 1.0' in text
        assert 'agl_store_active_attempts{status="preparing"} 1.0' in text
        assert (
            'agl_http_request_duration_seconds_count{method="POST",operation="dequeue_many_rollouts",status="200"} 1.0'
            in text
        )
        assert "server-timing" in answer.headers
    finally:
        await server.stop()


async def test_metrics_are_also_served_at_the_0_3_prometheus_path() -> None:
    server = await start_server_async()
    try:
        await server.enqueue_rollout("a")
        answer = call(server, "GET", "/v1/prometheus")
        assert answer.status == 200
        assert "agl_store_queue_depth 1.0" in answer.body.decode()
    finally:
        await server.stop()
