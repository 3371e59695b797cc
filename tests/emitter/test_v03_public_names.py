"""Public names of agentlightning 0.3 that user code calls: the env-var helpers at the top level,
`emit_annotation(annotation, propagate)`, `operation(fn=...)`, and the tag/link helpers of `utils.otel`."""

from __future__ import annotations

import pytest

import agentlightning as agl
from agentlightning.semconv import LinkPydanticModel
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import Span
from agentlightning.utils import otel as otel_utils


def test_the_env_var_helpers_are_exported_at_the_top_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_SERVER_PORT", "4747")
    assert agl.resolve_int_env_var(agl.LightningEnvVar.AGL_SERVER_PORT) == 4747
    assert agl.resolve_str_env_var("AGL_NOT_SET_ANYWHERE", fallback="x") == "x"
    assert agl.resolve_bool_env_var(agl.LightningEnvVar.AGL_EMITTER_DEBUG, override=True) is True
    assert agl.resolve_managed_store_flag(False) is False
    for name in ("LightningEnvVar", "resolve_bool_env_var", "resolve_int_env_var", "resolve_str_env_var"):
        assert name in agl.__all__


async def test_emit_annotation_takes_propagate_positionally() -> None:
    store = InMemoryLightningStore()
    tracer = OtelTracer()
    tracer.init_worker(0, store)
    try:
        rollout = await store.start_rollout(input=None)
        async with tracer.trace_context(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id):
            built = agl.emit_annotation({"agentlightning.tag": ["local"]}, False)
            agl.emit_annotation({"agentlightning.tag": ["stored"]}, True)
        assert built is not None and built.attributes["agentlightning.tag"] == ["local"]
        spans = await store.query_spans(rollout.rollout_id)
        assert [span.attributes["agentlightning.tag"] for span in spans] == [["stored"]]
    finally:
        tracer.teardown_worker(0)


def test_operation_wraps_a_function_given_as_fn() -> None:
    def double(x: int) -> int:
        return 2 * x

    traced = agl.operation(fn=double, propagate=False)
    assert traced(4) == 8 and traced.__name__ == "double"
    with agl.operation(name="block", propagate=False) as op:
        op.set_output(1)
    assert op.span().attributes["agentlightning.operation.output"] == 1
    with pytest.raises(RuntimeError, match="not started"):
        agl.operation("later", propagate=False).span()
    with pytest.raises(TypeError, match="function or an operation name"):
        agl.operation(fn=42)  # type: ignore[call-overload]


def test_tags_round_trip_through_attributes() -> None:
    attributes = otel_utils.make_tag_attributes(["reward.extrinsic", "gen_ai.model:gpt"])
    assert attributes == {"agentlightning.tag.0": "reward.extrinsic", "agentlightning.tag.1": "gen_ai.model:gpt"}
    assert otel_utils.extract_tags_from_attributes(attributes) == ["reward.extrinsic", "gen_ai.model:gpt"]
    assert otel_utils.extract_tags_from_attributes({"agentlightning.tag": ["a", "b"]}) == ["a", "b"]
    assert otel_utils.extract_tags_from_attributes({}) == []
    with pytest.raises(ValueError, match="Tag 1 must be a string"):
        otel_utils.make_tag_attributes(["ok", 3])  # type: ignore[list-item]


def test_links_round_trip_and_select_the_linked_spans() -> None:
    attributes = otel_utils.make_link_attributes({"gen_ai.response.id": "chatcmpl-2", "trace_id": "t" * 32})
    links = otel_utils.extract_links_from_attributes(attributes)
    assert links == [
        LinkPydanticModel(key_match="gen_ai.response.id", value_match="chatcmpl-2"),
        LinkPydanticModel(key_match="trace_id", value_match="t" * 32),
    ]
    spans = [
        Span.from_attributes(attributes={"gen_ai.response.id": f"chatcmpl-{i}"}, trace_id="t" * 32, span_id=f"{i:016x}")
        for i in range(3)
    ]
    assert otel_utils.query_linked_spans(spans, links) == [spans[2]]
    assert otel_utils.query_linked_spans(spans, [LinkPydanticModel(key_match="span_id", value_match=f"{1:016x}")]) == [
        spans[1]
    ]
    with pytest.raises(ValueError, match="must be a string"):
        otel_utils.make_link_attributes({"gen_ai.response.id": 7})  # type: ignore[dict-item]


def test_attribute_helpers_filter_expand_sanitise_and_check() -> None:
    assert otel_utils.flatten_attributes({"a": [1, 2]}) == {"a": [1, 2]}
    assert otel_utils.flatten_attributes({"a": [1, 2]}, expand_leaf_lists=True) == {"a.0": 1, "a.1": 2}
    assert otel_utils.filter_attributes({"a": 1, "a.b": 2, "ab": 3}, "a") == {"a": 1, "a.b": 2}
    assert otel_utils.sanitize_attributes({"a": {"b": 1}, "c": None, "d": (1, 2)}) == {"a": '{"b": 1}', "d": [1, 2]}
    assert otel_utils.sanitize_list_attribute_sanity([1, True]) == [1, 1]
    assert otel_utils.sanitize_list_attribute_sanity([1, 2.5]) == [1.0, 2.5]
    with pytest.raises(ValueError, match=r"\['int', 'str'\]"):
        otel_utils.sanitize_list_attribute_sanity(["a", 1])
    otel_utils.check_attributes_sanity({"a": 1, "b": ["x"]})
    with pytest.raises(ValueError, match="'b' has a value"):
        otel_utils.check_attributes_sanity({"a": 1, "b": {"nested": 1}})
    assert otel_utils.full_qualified_name(Span) == "agentlightning.types.tracer.Span"
    assert otel_utils.full_qualified_name(int) == "int"


def test_a_tracer_without_the_active_processor_records_nowhere() -> None:
    tracer = otel_utils.get_tracer(use_active_span_processor=False)
    with tracer.start_as_current_span("invisible") as span:
        assert span.is_recording()
    assert otel_utils.get_tracer_provider() is otel_utils.get_tracer_provider()
