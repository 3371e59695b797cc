"""The public data model: spans and their OpenTelemetry conversion, resources, rollouts, pagination, UNSET."""

from __future__ import annotations

import logging
import pickle
import time
from unittest.mock import Mock

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import TypeAdapter, ValidationError

import agentlightning as agl
from agentlightning.store.base import UNSET, Unset
from agentlightning.types import (
    LLM,
    Attempt,
    AttemptedRollout,
    NamedResources,
    PaginatedResult,
    PromptTemplate,
    ProxyLLM,
    ResourcesUpdate,
    RolloutConfig,
    Span,
    SpanCoreFields,
    SpanNames,
    TraceStatus,
)
from agentlightning.types.tracer import convert_timestamp, extract_extra_fields


def finished_sdk_span() -> object:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("parent"), tracer.start_as_current_span("child") as span:
        span.set_attribute("gen_ai.request.model", "smol")
        span.add_event("checkpoint", {"step": 1})
    return exporter.get_finished_spans()[0]


def test_convert_timestamp_handles_nanoseconds_seconds_and_missing_values() -> None:
    assert convert_timestamp(None) is None
    assert convert_timestamp(0) is None
    assert convert_timestamp(1_700_000_000_000_000_000) == pytest.approx(1_700_000_000.0)
    assert convert_timestamp(1234) == 1234


def test_extract_extra_fields_strips_underscores_and_skips_declared_names() -> None:
    class Source:
        def __init__(self) -> None:
            self._kind = "CLIENT"
            self.name = "skip-me"
            self.__private = 1
            self._payload = object()

    extras = extract_extra_fields(Source(), ["name"])
    assert extras["kind"] == "CLIENT"
    assert "name" not in extras
    assert isinstance(extras["payload"], str)


def test_extract_extra_fields_tolerates_mocks() -> None:
    assert isinstance(extract_extra_fields(Mock(), ["name"]), dict)


def test_span_from_opentelemetry_keeps_ids_parent_attributes_and_events() -> None:
    sdk_span = finished_sdk_span()
    span = Span.from_opentelemetry(sdk_span, rollout_id="ro-1", attempt_id="at-1", sequence_id=7)  # type: ignore[arg-type]
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == ("ro-1", "at-1", 7)
    assert len(span.trace_id) == 32 and len(span.span_id) == 16
    assert span.parent_id is not None and len(span.parent_id) == 16
    assert span.name == "child"
    assert span.attributes == {"gen_ai.request.model": "smol"}
    assert span.events[0].name == "checkpoint" and span.events[0].attributes == {"step": 1}
    assert span.start_time is not None and span.end_time is not None and span.end_time >= span.start_time
    assert span.start_time == pytest.approx(time.time(), abs=60)
    assert span.context is not None and span.context.span_id == span.span_id
    assert span.parent is not None and span.parent.span_id == span.parent_id
    assert span.status.status_code == "UNSET"
    assert "service.name" in span.resource.attributes


def test_span_from_a_mock_readable_span() -> None:
    mock = Mock()
    mock.name = "test_span"
    mock.get_span_context.return_value = Mock(trace_id=111111, span_id=222222, is_remote=False, trace_state={})
    mock.parent = None
    mock.status.status_code.name = "OK"
    mock.status.description = None
    mock.attributes = {"test": "value"}
    mock.events = []
    mock.links = []
    mock.start_time = time.time_ns()
    mock.end_time = mock.start_time + 1_000_000
    mock.resource = Mock(attributes={}, schema_url="")
    span = Span.from_opentelemetry(mock, rollout_id="ro", attempt_id="at", sequence_id=1)
    assert span.trace_id == format(111111, "032x") and span.span_id == format(222222, "016x")
    assert span.parent_id is None and span.status.status_code == "OK"


def test_span_from_attributes_fills_ids_and_defaults() -> None:
    span = Span.from_attributes(attributes={"reward": 1.0})
    assert len(span.trace_id) == 32 and len(span.span_id) == 16
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == ("", "", 0)
    assert span.name == SpanNames.VIRTUAL.value == "agentlightning.virtual"
    assert span.status == TraceStatus(status_code="OK")
    assert span.parent is None and span.context is not None
    child = Span.from_attributes(attributes={}, trace_id=span.trace_id, parent_id=span.span_id)
    assert child.parent is not None and child.parent.span_id == span.span_id


def test_span_from_core_fields_defaults_the_start_time_to_now() -> None:
    core = SpanCoreFields(name="agentlightning.annotation", attributes={"agentlightning.reward.0.value": 1.0})
    span = Span.from_core_fields(core, rollout_id="ro-1", attempt_id="at-1", sequence_id=3)
    assert span.name == "agentlightning.annotation" and span.sequence_id == 3
    assert span.start_time == pytest.approx(time.time(), abs=5)


def test_span_keeps_extra_fields_through_json() -> None:
    span = Span.from_attributes(attributes={})
    data = span.model_dump()
    data["kind"] = "SpanKind.SERVER"
    restored = Span.model_validate_json(Span.model_validate(data).model_dump_json())
    assert restored.model_dump()["kind"] == "SpanKind.SERVER"


def test_span_like_alias_is_resolved_lazily() -> None:
    from opentelemetry.sdk.trace import ReadableSpan

    assert ReadableSpan in agl.SpanLike.__args__  # type: ignore[attr-defined]
    assert agl.types.RolloutRawResult is not None


def test_llm_base_url_ignores_rollout_arguments() -> None:
    llm = LLM(endpoint="http://127.0.0.1:8000/v1", model="m")
    assert llm.get_base_url("ro-1", "at-1") == "http://127.0.0.1:8000/v1"
    assert llm.sampling_parameters == {}


@pytest.mark.parametrize(
    "endpoint, expected",
    [
        ("http://h:1/v1/", "http://h:1/rollout/ro-1/attempt/at-1/v1"),
        ("http://h:1/v1", "http://h:1/rollout/ro-1/attempt/at-1/v1"),
        ("http://h:1", "http://h:1/rollout/ro-1/attempt/at-1"),
        ("http://h:1/", "http://h:1/rollout/ro-1/attempt/at-1"),
    ],
)
def test_proxy_llm_routes_calls_to_the_rollout(endpoint: str, expected: str) -> None:
    assert ProxyLLM(endpoint=endpoint, model="m").get_base_url("ro-1", "at-1") == expected


def test_proxy_llm_base_url_without_ids_is_the_endpoint() -> None:
    assert ProxyLLM(endpoint="http://h:1/v1", model="m").get_base_url(None, None) == "http://h:1/v1"


def test_proxy_llm_requires_both_ids() -> None:
    with pytest.raises(ValueError, match="must be strings"):
        ProxyLLM(endpoint="http://h:1", model="m").get_base_url("ro-1", None)


def test_proxy_llm_binds_to_an_attempted_rollout_as_a_plain_llm() -> None:
    proxy = ProxyLLM(endpoint="http://h:1/v1", model="m", api_key="k", sampling_parameters={"temperature": 0.2})
    rollout = AttemptedRollout(
        rollout_id="ro-1",
        input=None,
        start_time=0.0,
        attempt=Attempt(rollout_id="ro-1", attempt_id="at-1", sequence_id=1, start_time=0.0),
    )
    bound = proxy.with_attempted_rollout(rollout)
    assert type(bound) is LLM
    assert bound.endpoint == "http://h:1/rollout/ro-1/attempt/at-1/v1"
    assert (bound.model, bound.api_key, bound.sampling_parameters) == ("m", "k", {"temperature": 0.2})


def test_reading_a_proxy_llm_endpoint_directly_warns(caplog: pytest.LogCaptureFixture) -> None:
    proxy = ProxyLLM(endpoint="http://h:1/v1", model="m")
    with caplog.at_level(logging.WARNING):
        assert proxy.endpoint == "http://h:1/v1"
    assert "get_base_url" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        proxy.get_base_url("ro", "at")
    assert caplog.text == ""


def test_prompt_template_formats_f_strings_only() -> None:
    assert PromptTemplate(template="Hi {name}", engine="f-string").format(name="Ada") == "Hi Ada"
    with pytest.raises(NotImplementedError, match="jinja"):
        PromptTemplate(template="Hi {{ name }}", engine="jinja").format(name="Ada")


def test_named_resources_parse_through_the_discriminator() -> None:
    parsed = TypeAdapter(NamedResources).validate_python(
        {
            "llm": {"resource_type": "llm", "endpoint": "e", "model": "m"},
            "proxy": {"resource_type": "proxy_llm", "endpoint": "e", "model": "m"},
            "prompt": {"resource_type": "prompt_template", "template": "t", "engine": "poml"},
        }
    )
    assert [type(value) for value in parsed.values()] == [LLM, ProxyLLM, PromptTemplate]


def test_resources_update_defaults_its_version_and_timestamps() -> None:
    update = ResourcesUpdate(resources_id="v1", resources={})
    assert update.version == 1 and update.create_time == pytest.approx(update.update_time, abs=1)


def test_rollout_config_validates_its_bounds() -> None:
    with pytest.raises(ValidationError):
        RolloutConfig(max_attempts=0)
    with pytest.raises(ValidationError):
        RolloutConfig(timeout_seconds=-1)
    with pytest.raises(ValidationError):
        RolloutConfig(retry_condition=["exploded"])  # type: ignore[list-item]
    assert RolloutConfig().model_dump() == {
        "timeout_seconds": None,
        "unresponsive_seconds": None,
        "max_attempts": 1,
        "retry_condition": [],
    }


def test_attempted_rollout_rejects_an_attempt_of_another_rollout() -> None:
    with pytest.raises(ValidationError, match="Inconsistent rollout_id"):
        AttemptedRollout(
            rollout_id="ro-1",
            input=None,
            start_time=0.0,
            attempt=Attempt(rollout_id="ro-2", attempt_id="at-1", sequence_id=1, start_time=0.0),
        )


def test_paginated_result_behaves_like_a_read_only_list() -> None:
    page = PaginatedResult[str](items=["a", "b", "c"], limit=3, offset=1, total=5)
    assert len(page) == 3 and page[0] == "a" and page[-1] == "c" and page[0:2] == ["a", "b"]
    assert list(page) == ["a", "b", "c"] and "b" in page and page.index("c") == 2 and page.count("a") == 1
    assert page == ["a", "b", "c"] and list(reversed(page)) == ["c", "b", "a"]
    assert repr(page) == "<PaginatedResult (1:4 of 5) ['a', 'b', ...]>"
    assert repr(PaginatedResult[str](items=[], limit=-1, offset=0, total=0)) == "<PaginatedResult (0: of 0) []>"
    assert not PaginatedResult[str](items=[], limit=-1, offset=0, total=0)
    assert page.model_dump() == {"items": ["a", "b", "c"], "limit": 3, "offset": 1, "total": 5}


def test_unset_is_a_singleton_that_survives_pickling() -> None:
    assert repr(UNSET) == "UNSET"
    assert isinstance(UNSET, Unset)
    assert pickle.loads(pickle.dumps(UNSET)) is UNSET
    assert Unset() is UNSET


def test_top_level_package_reexports_the_public_api() -> None:
    for name in ("Rollout", "Attempt", "Span", "LightningStore", "InMemoryLightningStore", "LightningStoreThreaded"):
        assert hasattr(agl, name), name
