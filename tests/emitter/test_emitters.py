"""Messages, objects, exceptions, annotations and operations: what span each emitter records, and that bad input is
logged instead of raised."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from agentlightning.emitter import (
    emit_annotation,
    emit_exception,
    emit_message,
    emit_object,
    get_message_value,
    get_object_value,
    operation,
)
from agentlightning.semconv import AGL_ANNOTATION, AGL_EXCEPTION, AGL_MESSAGE, AGL_OBJECT, AGL_OPERATION
from agentlightning.tracer import DummyTracer
from agentlightning.types import Span


def record(fn: Any) -> list[Span]:
    tracer = DummyTracer()
    with tracer._trace_context_sync():
        fn()
    return tracer.get_last_trace()


def test_emit_message_records_the_text_under_the_new_and_the_legacy_attribute() -> None:
    [span] = record(lambda: emit_message("thinking..."))
    assert span.name == AGL_MESSAGE
    assert span.attributes == {"agentlightning.message.body": "thinking...", "message": "thinking..."}
    assert get_message_value(span) == "thinking..."


def test_emit_message_with_a_non_string_logs_an_error_and_records_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert record(lambda: emit_message(42)) == []  # type: ignore[arg-type]
    assert "Message must be a string" in caplog.text


def test_emit_object_stores_json_for_structured_values() -> None:
    [span] = record(lambda: emit_object({"plan": ["a", "b"], "n": 2}))
    assert span.name == AGL_OBJECT
    assert span.attributes["agentlightning.object.type"] == "dict"
    assert span.attributes["object"] == '{"plan": ["a", "b"], "n": 2}'
    assert get_object_value(span) == {"plan": ["a", "b"], "n": 2}


def test_emit_object_stores_plain_values_as_literals() -> None:
    [span] = record(lambda: emit_object(3.5))
    assert span.attributes["agentlightning.object.literal"] == 3.5
    assert get_object_value(span) == 3.5


def test_emit_object_accepts_dataclasses_and_pydantic_models() -> None:
    @dataclasses.dataclass
    class Step:
        action: str

    spans = record(lambda: (emit_object(Step("search")), emit_object(Span.from_attributes(attributes={"a": 1}))))
    assert get_object_value(spans[0]) == {"action": "search"}
    assert get_object_value(spans[1])["attributes"] == {"a": 1}


def test_emit_object_with_a_non_serialisable_value_logs_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert record(lambda: emit_object({"handle": object()})) == []
    assert "Object must be JSON serializable" in caplog.text


def test_emit_exception_records_semconv_attributes_and_a_stacktrace() -> None:
    def boom() -> None:
        try:
            raise KeyError("missing")
        except KeyError as exc:
            emit_exception(exc)

    [span] = record(boom)
    assert span.name == AGL_EXCEPTION
    assert span.attributes["exception.type"] == "KeyError"
    assert span.attributes["exception.message"] == "'missing'"
    assert span.attributes["exception.escaped"] is True
    assert "KeyError" in str(span.attributes["exception.stacktrace"])


def test_emit_exception_with_a_non_exception_logs_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert record(lambda: emit_exception("oops")) == []  # type: ignore[arg-type]
    assert "Expected an BaseException instance" in caplog.text


def test_emit_annotation_flattens_nested_values_into_attributes() -> None:
    [span] = record(
        lambda: emit_annotation(
            {
                "agentlightning.reward": [{"name": "acc", "value": 1.0}],
                "agentlightning.tag": ["good", "short"],
                "meta": {"step": 3},
            }
        )
    )
    assert span.name == AGL_ANNOTATION
    assert span.attributes == {
        "agentlightning.reward.0.name": "acc",
        "agentlightning.reward.0.value": 1.0,
        "agentlightning.tag": ["good", "short"],
        "meta.step": 3,
    }


@pytest.mark.parametrize("bad", [["not", "a", "mapping"], {1: "non-string key"}, {"": "empty key"}])
def test_emit_annotation_rejects_bad_input_with_a_logged_error(bad: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert record(lambda: emit_annotation(bad)) == []
    assert "Annotation" in caplog.text


def test_operation_decorator_records_name_inputs_and_output() -> None:
    @operation
    def plan(task: str, depth: int = 2) -> dict[str, Any]:
        return {"steps": [task] * depth}

    [span] = record(lambda: plan("write"))
    assert span.name == AGL_OPERATION
    assert span.attributes["agentlightning.operation.name"].endswith("plan")
    assert span.attributes["agentlightning.operation.input.task"] == "write"
    assert span.attributes["agentlightning.operation.input.depth"] == 2
    assert span.attributes["agentlightning.operation.output.steps"] == ["write", "write"]
    assert span.start_time is not None and span.end_time is not None and span.end_time >= span.start_time


async def test_operation_decorator_works_on_async_functions_with_a_custom_name_and_attributes() -> None:
    @operation(name="grade", judge="strict")
    async def grade(answer: str) -> float:
        return 1.0 if answer == "42" else 0.0

    tracer = DummyTracer()
    async with tracer.trace_context():
        assert await grade("42") == 1.0
    [span] = tracer.get_last_trace()
    assert span.attributes["agentlightning.operation.name"] == "grade"
    assert span.attributes["judge"] == "strict"
    assert span.attributes["agentlightning.operation.output"] == 1.0


def test_operation_records_and_reraises_exceptions() -> None:
    @operation
    def fail() -> None:
        raise ValueError("bad step")

    tracer = DummyTracer()
    with tracer._trace_context_sync(), pytest.raises(ValueError, match="bad step"):
        fail()
    [span] = tracer.get_last_trace()
    assert span.status.status_code == "ERROR"
    assert span.attributes["exception.type"] == "ValueError"


def test_operation_as_context_manager_with_explicit_input_and_output() -> None:
    def run() -> None:
        with operation("retrieve") as op:
            op.set_input(query="cats", k=3)
            op.set_output(["doc1", "doc2"])

    [span] = record(run)
    assert span.attributes["agentlightning.operation.name"] == "retrieve"
    assert span.attributes["agentlightning.operation.input.query"] == "cats"
    assert span.attributes["agentlightning.operation.output"] == ["doc1", "doc2"]


def test_operation_stores_unserialisable_inputs_as_text() -> None:
    marker = object()

    @operation
    def use(handle: Any) -> None:
        return None

    [span] = record(lambda: use(marker))
    assert span.attributes["agentlightning.operation.input.handle"] == repr(marker)


def test_operation_with_propagate_false_is_not_recorded_by_the_active_tracer() -> None:
    @operation(propagate=False)
    def quiet() -> int:
        return 1

    assert record(quiet) == []
