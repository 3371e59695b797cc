"""The run summary's capture check (`agentlightning.trainer.capture_check`): a run in which no rollout produced an
LLM call says so once, with the diagnosis' cause and fix; a run with one says nothing."""

from __future__ import annotations

from typing import Any

import agentlightning as agl
from agentlightning.store import InMemoryLightningStore
from agentlightning.trainer.capture_check import missing_llm_calls
from agentlightning.types import Span

from ..execution.helpers import EnqueueAllAlgorithm
from ..runner.agents import ScriptedAgent


def _span(rollout: Any, name: str, span_id: str, **attributes: Any) -> Span:
    return Span.from_attributes(
        attributes=attributes,
        rollout_id=rollout.rollout_id,
        attempt_id=rollout.attempt.attempt_id,
        sequence_id=int(span_id, 16),
        name=name,
        trace_id="a" * 32,
        span_id=span_id.rjust(16, "0"),
        parent_id=None,
        start_time=0.0,
        end_time=1.0,
    )


async def _finished(store: InMemoryLightningStore, *spans: tuple[str, dict[str, Any]]) -> None:
    rollout = await store.start_rollout(input={})
    for index, (name, attributes) in enumerate(spans, start=1):
        await store.add_span(_span(rollout, name, f"{index:x}", **attributes))
    await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")


def test_a_run_in_which_no_rollout_made_an_llm_call_says_so_once_in_its_summary() -> None:
    trainer = agl.Trainer(algorithm=EnqueueAllAlgorithm(), strategy="shm", progress="off")
    trainer.fit(ScriptedAgent(), [{"reward": 1.0}, {"reward": 0.0}, {"reward": 1.0}])
    assert trainer.summary is not None
    note = str(trainer.summary.missing_llm_calls)
    assert note.startswith("no rollout produced an LLM call (3 rollouts with spans): no LLM call captured"), note
    assert "no instrumented LLM client recorded a call" in note and "LLMProxy" in note
    assert trainer.summary.describe().count("no rollout produced an LLM call") == 1
    assert trainer.summary.to_dict()["missing_llm_calls"] == note


async def test_one_rollout_with_an_llm_call_is_enough() -> None:
    store = InMemoryLightningStore()
    llm_call = ("openai.chat.completion", {"prompt_token_ids": [1, 2], "response_token_ids": [3]})
    await _finished(store, llm_call, ("agentlightning.reward", {"reward": 1.0}))
    await _finished(store, ("agentlightning.reward", {"reward": 0.0}))  # the newest has none
    assert await missing_llm_calls(store, agl.TracerTraceToTriplet()) is None


async def test_rollouts_without_spans_or_before_the_run_are_not_counted() -> None:
    store = InMemoryLightningStore()
    await _finished(store, ("agentlightning.reward", {"reward": 0.0}))
    await _finished(store)  # failed before recording anything: its failure is the cause
    assert await missing_llm_calls(store, agl.TracerTraceToTriplet(), since=1e12) is None
    note = await missing_llm_calls(store, agl.TracerTraceToTriplet())
    assert note is not None and note.startswith("no rollout produced an LLM call (1 rollouts with spans)")


async def test_an_adapter_that_does_not_diagnose_is_not_second_guessed() -> None:
    store = InMemoryLightningStore()
    await _finished(store, ("agentlightning.reward", {"reward": 0.0}))
    assert await missing_llm_calls(store, agl.TraceToMessages()) is None
