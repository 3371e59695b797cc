"""Empty trajectories are explained: a warning with counts says whether there were no spans, no LLM calls, no
matching agent, or no token ids."""

from __future__ import annotations

import logging

import pytest

from agentlightning.adapter import TracerTraceToTriplet
from agentlightning.types import Span, TraceStatus

from .spans import llm, span


def test_no_spans_at_all(caplog: pytest.LogCaptureFixture) -> None:
    adapter = TracerTraceToTriplet()
    with caplog.at_level(logging.WARNING):
        assert adapter.adapt([]) == []
    assert adapter.last_diagnosis is not None and "no spans" in str(adapter.last_diagnosis.reason)
    assert "empty trajectory" in caplog.text


def test_no_llm_call_captured_lists_the_span_names_that_were_seen(caplog: pytest.LogCaptureFixture) -> None:
    spans = [span("agent", "a", None), span("tool", "t", "a"), span("tool", "t2", "a")]
    adapter = TracerTraceToTriplet()
    with caplog.at_level(logging.WARNING):
        assert adapter.adapt(spans) == []
    diagnosis = adapter.last_diagnosis
    assert diagnosis is not None and diagnosis.total_spans == 3 and diagnosis.llm_call_spans == 0
    assert "no LLM call captured" in str(diagnosis.reason)
    assert "tool (2)" in caplog.text and "instrument_all" in caplog.text


def test_agent_filter_matching_nothing_lists_the_agents(caplog: pytest.LogCaptureFixture) -> None:
    spans = [span("agent", "a", None, 0, 10, agent__name="writer"), llm("l", "a", 1, 2, "x")]
    adapter = TracerTraceToTriplet(agent_match="reader")
    with caplog.at_level(logging.WARNING):
        assert adapter.adapt(spans) == []
    assert "agent filter matched nothing" in caplog.text and "writer" in caplog.text
    assert adapter.last_diagnosis is not None and adapter.last_diagnosis.llm_call_spans == 1


def test_calls_without_token_ids_are_reported_with_counts(caplog: pytest.LogCaptureFixture) -> None:
    bare = span("openai.chat.completion", "l", None, 0, 1, gen_ai__response__id="x")
    with caplog.at_level(logging.WARNING):
        triplets = TracerTraceToTriplet().adapt([bare])
    assert len(triplets) == 1 and triplets[0].prompt["token_ids"] == []
    assert "1 of 1 triplets have no prompt or response token ids" in caplog.text

    caplog.clear()
    adapter = TracerTraceToTriplet(_skip_empty_token_spans=True)
    with caplog.at_level(logging.WARNING):
        assert adapter.adapt([bare]) == []
    assert "no token ids on the calls" in caplog.text


def test_a_healthy_trajectory_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    adapter = TracerTraceToTriplet()
    with caplog.at_level(logging.WARNING):
        assert len(adapter.adapt([llm("l", None, 0, 1, "x")])) == 1
    assert caplog.text == ""
    assert adapter.last_diagnosis is not None and adapter.last_diagnosis.ok


def test_llm_calls_under_a_name_the_pattern_misses_are_named_instead_of_blaming_instrumentation() -> None:
    from agentlightning.adapter.diagnostics import diagnose_trajectory
    from agentlightning.types import Span

    call = Span.from_attributes(
        attributes={"prompt_token_ids": [1], "response_token_ids": [2]},
        rollout_id="ro",
        attempt_id="at",
        sequence_id=1,
        name="openai.responses",
    )
    diagnosis = diagnose_trajectory([call], [], llm_call_match=r"openai\.chat\.completion")
    assert diagnosis.reason is not None
    assert "openai.responses (1)" in diagnosis.reason and "instrumented" not in diagnosis.reason


def _failed_call(span_id: str, via_proxy: str = "") -> Span:
    call = span("openai.chat.completion", span_id, None, 0, 1)
    attributes = {"agentlightning.llm.via_proxy": via_proxy} if via_proxy else {}
    status = TraceStatus(status_code="ERROR", description="Connection error.")
    return call.model_copy(update={"status": status, "attributes": attributes})


def test_calls_that_all_failed_are_named_as_failures_not_as_missing_token_ids() -> None:
    adapter = TracerTraceToTriplet(_skip_empty_token_spans=True)
    assert adapter.adapt([_failed_call("a"), _failed_call("b")]) == []
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert "the 2 LLM calls failed" in reason and "Connection error." in reason and "token ids" not in reason


def test_failed_calls_sent_to_a_proxy_say_nothing_reached_it() -> None:
    url = "http://127.0.0.1:4000/rollout/ro-1/attempt/at-1"
    adapter = TracerTraceToTriplet(_skip_empty_token_spans=True)
    assert adapter.adapt([_failed_call("a", via_proxy=url)]) == []
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert reason.startswith("nothing reached the LLM proxy") and url in reason and "Trainer(llm_proxy=...)" in reason


def test_triplets_of_failed_calls_say_why_they_have_no_token_ids(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert len(TracerTraceToTriplet().adapt([_failed_call("a")])) == 1
    assert "1 of the calls failed" in caplog.text and "Connection error." in caplog.text


def test_litellm_spans_without_an_openai_call_name_the_litellm_client() -> None:
    spans = [span("agent", "a", None), span("litellm_request", "l", "a", gen_ai__system="hosted_vllm")]
    adapter = TracerTraceToTriplet()
    assert adapter.adapt(spans) == []
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert "through LiteLLM" in reason and "litellm_request" in reason and "LLMProxy" in reason


def test_no_instrumented_client_names_the_fixes() -> None:
    adapter = TracerTraceToTriplet()
    assert adapter.adapt([span("agent", "a", None), span("tool", "t", "a")]) == []
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert "no instrumented LLM client recorded a call" in reason
    assert "OtelTracer(instrument=True)" in reason and "LLMProxy" in reason


def test_no_instrumented_client_names_the_clients_that_bypass_the_openai_sdk() -> None:
    adapter = TracerTraceToTriplet()
    assert adapter.adapt([span("agent", "a", None)]) == []
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert "hosted_vllm/" in reason and "engine='litellm'" in reason and "Trainer(llm_proxy=...)" in reason


def test_litellm_spans_name_its_openai_provider_as_the_fix() -> None:
    spans = [span("agent", "a", None), span("litellm_request", "l", "a", gen_ai__system="hosted_vllm")]
    adapter = TracerTraceToTriplet()
    adapter.adapt(spans)
    reason = str(adapter.last_diagnosis.reason if adapter.last_diagnosis else "")
    assert "model='openai/<name>'" in reason
