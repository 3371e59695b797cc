"""The runner's rules as plain functions: result normalisation, outcomes, metadata."""

from __future__ import annotations

import math

import pytest

from agentlightning.emitter.reward import emit_reward
from agentlightning.runner.results import (
    AgentExit,
    AgentTimeout,
    RunnerInterrupted,
    StoreDeclaredTimeout,
    attempt_metadata,
    normalize_result,
    outcome_of_exception,
)
from agentlightning.types import Span, SpanCoreFields


def _span() -> Span:
    return Span.from_attributes(attributes={"k": 1}, rollout_id="r", attempt_id="a", sequence_id=1)


def test_none_result_stores_nothing() -> None:
    result = normalize_result(None)
    assert result.reward is None and not result.spans and not result.core_fields and not result.empty_list


@pytest.mark.parametrize(("value", "expected"), [(0.5, 0.5), (2, 2.0), (True, 1.0), (False, 0.0)])
def test_numbers_become_a_float_reward(value: object, expected: float) -> None:
    assert normalize_result(value).reward == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_reward_that_is_not_finite_is_rejected(value: float) -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        normalize_result(value)


def test_a_list_of_spans_is_stored_as_is() -> None:
    spans = [_span(), _span()]
    assert normalize_result(spans).spans == spans


def test_a_list_of_span_core_fields_is_stored_with_new_sequence_ids() -> None:
    fields = emit_reward(0.3, propagate=False)
    assert isinstance(fields, SpanCoreFields)
    assert normalize_result([fields]).core_fields == [fields]


def test_an_empty_list_is_flagged() -> None:
    assert normalize_result([]).empty_list


def test_a_list_mixing_kinds_names_the_types() -> None:
    with pytest.raises(TypeError, match="Span, int"):
        normalize_result([_span(), 3])


@pytest.mark.parametrize(("value", "name"), [({"reward": 1}, "dict"), ("1.0", "str"), (object(), "object")])
def test_other_results_fail_with_a_type_error_naming_the_type(value: object, name: str) -> None:
    with pytest.raises(TypeError, match=f"returned a {name}"):
        normalize_result(value)


def test_an_exception_fails_the_attempt_with_its_type_message_and_traceback() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        outcome = outcome_of_exception(exc)
    assert outcome.status == "failed"
    assert outcome.reason == "RuntimeError: boom"
    assert outcome.error_type == "RuntimeError"
    assert outcome.traceback is not None and "raise RuntimeError" in outcome.traceback


def test_very_long_messages_are_shortened() -> None:
    outcome = outcome_of_exception(ValueError("x" * 10_000))
    assert outcome.reason is not None and len(outcome.reason) < 700 and "characters cut" in outcome.reason


@pytest.mark.parametrize("exc", [AgentTimeout(3.0), StoreDeclaredTimeout()])
def test_timeouts_record_the_timeout_status(exc: Exception) -> None:
    outcome = outcome_of_exception(exc)
    assert outcome.status == "timeout" and outcome.reason == str(exc)


def test_sys_exit_and_interruption_fail_the_attempt_without_a_traceback() -> None:
    assert outcome_of_exception(AgentExit(3)).reason == "the agent called sys.exit(3)"
    interrupted = outcome_of_exception(RunnerInterrupted())
    assert interrupted.status == "failed" and interrupted.traceback is None


def test_metadata_keeps_previous_keys_and_adds_reward_duration_and_failure() -> None:
    outcome = outcome_of_exception(RuntimeError("boom"))
    metadata = attempt_metadata({"user": 1, "error": "old"}, outcome, final_reward=None, duration_seconds=1.23456789)
    assert metadata["user"] == 1
    assert metadata["error"] == "RuntimeError: boom"
    assert metadata["final_reward"] is None
    assert metadata["duration_seconds"] == 1.234568


def test_success_metadata_clears_an_earlier_error() -> None:
    from agentlightning.runner.results import SUCCEEDED

    metadata = attempt_metadata({"error": "old", "traceback": "tb"}, SUCCEEDED, final_reward=0.5, duration_seconds=0)
    assert metadata == {"final_reward": 0.5, "duration_seconds": 0}
