"""Drift in the dashboard: the run's drift rate the store server computes for the Overview
(`agentlightning/dashboard/drift.py`), over rollouts whose calls extend their conversation, drift, or start new ones;
and, in Chromium, the Overview's flag and the notes on a drifted rollout's conversation.

The scenarios run on the package's loop thread (see test_progress.py)."""

from __future__ import annotations

import time
from typing import Any, Optional

from agentlightning.dashboard.drift import RunDrift
from agentlightning.store import InMemoryLightningStore, LightningStore
from agentlightning.types import Span

from .conftest import LoopThread, Page, serve
from .run_data import RunData, add_spans

Call = tuple[list[int], list[int], Optional[str]]

EXTENDS: list[Call] = [([1, 2], [3], None), ([1, 2, 3, 4], [5], None)]
DRIFTS: list[Call] = [([1, 2], [3], None), ([1, 2, 9, 4], [5], None)]  # the history came back retokenized
TWO_CONVERSATIONS: list[Call] = [([1, 2], [3], "solver"), ([1, 2, 3, 4], [5], "reviewer")]


def call_spans(rollout_id: str, attempt_id: str, calls: list[Call], *, proxy: bool = False) -> list[Span]:
    """Client-side spans (an agent span around each call, as instrumentation records them) or, with `proxy`, the
    LLM proxy's spans, for `calls` in order."""
    spans: list[Span] = []
    start = time.time() - 10
    for index, (prompt, response, agent) in enumerate(calls):
        at = start + index
        common: dict[str, Any] = {"rollout_id": rollout_id, "attempt_id": attempt_id, "trace_id": f"{index:032x}"}
        parent = None
        if agent is not None:
            parent = Span.from_attributes(
                attributes={"agent.name": agent}, name=agent, start_time=at, end_time=at + 0.9, **common
            )
            spans.append(parent)
        spans.append(
            Span.from_attributes(
                attributes={
                    "prompt_token_ids": prompt,
                    "response_token_ids": response,
                    "gen_ai.response.id": f"chatcmpl-{rollout_id}-{index}",
                },
                name="litellm_request" if proxy else "openai.chat.completion",
                parent_id=parent.span_id if parent else None,
                start_time=at + 0.1,
                end_time=at + 0.5,
                **common,
            )
        )
    return spans


async def finished_rollout(store: LightningStore, calls: list[Call], *, proxy: bool = False) -> str:
    rollout = await store.start_rollout(input={}, mode="train")
    attempt_id = rollout.attempt.attempt_id
    await add_spans(store, call_spans(rollout.rollout_id, attempt_id, calls, proxy=proxy))
    await store.update_attempt(rollout.rollout_id, attempt_id, status="succeeded")
    return rollout.rollout_id


class CountingStore(InMemoryLightningStore):
    """Counts the span reads of the drift sample."""

    span_reads = 0

    async def query_spans(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.span_reads += 1
        return await super().query_spans(*args, **kwargs)


def test_the_drift_rate_counts_drifted_continuations_over_the_recent_rollouts(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        await finished_rollout(store, EXTENDS)
        drifted = await finished_rollout(store, DRIFTS)
        await finished_rollout(store, TWO_CONVERSATIONS)
        await finished_rollout(store, [])  # no LLM call: not in the sample
        drift = await RunDrift(store).snapshot(100)
        assert (drift["rollouts"], drift["calls"], drift["continuations"], drift["drifted"]) == (3, 6, 2, 1)
        assert drift["drift_rate"] == 0.5
        assert (drift["rollouts_drifted"], drift["scanned"], drift["without_calls"]) == (1, 4, 1)
        [listed] = drift["drifted_rollouts"]
        assert (listed["rollout_id"], listed["calls"], listed["continuations"], listed["drifted"]) == (drifted, 2, 1, 1)
        assert drift["sources"] == {"adapter": 3} and drift["complete"] and drift["pending"] == 0

    loop_thread.run(scenario())


def test_calls_only_the_llm_proxy_recorded_are_counted_too(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        await finished_rollout(store, DRIFTS, proxy=True)
        drift = await RunDrift(store).snapshot(100)
        assert (drift["sources"], drift["continuations"], drift["drifted"]) == ({"proxy": 1}, 1, 1)

    loop_thread.run(scenario())


def test_the_sample_is_the_newest_rollouts_with_calls(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        for _ in range(4):
            await finished_rollout(store, DRIFTS)
        for _ in range(3):
            await finished_rollout(store, EXTENDS)
        drift = await RunDrift(store).snapshot(3)
        assert (drift["rollouts"], drift["continuations"], drift["drifted"], drift["drift_rate"]) == (3, 3, 0, 0.0)

    loop_thread.run(scenario())


def test_without_continuations_there_is_no_rate(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        await finished_rollout(store, [([1], [2], None)])
        drift = await RunDrift(store).snapshot()
        assert (drift["rollouts"], drift["continuations"], drift["drift_rate"]) == (1, 0, None)

    loop_thread.run(scenario())


def test_spans_are_read_in_bounded_steps_and_once(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = CountingStore()
        for _ in range(5):
            await finished_rollout(store, DRIFTS)
        drift = RunDrift(store, max_span_reads=2, settle_seconds=0.0)
        first = await drift.snapshot(100)
        assert (first["complete"], first["span_reads"], first["rollouts"], store.span_reads) == (False, 2, 2, 2)
        while not (await drift.snapshot(100))["complete"]:
            pass
        assert store.span_reads == 5
        settled = await drift.snapshot(100)
        assert (settled["rollouts"], settled["drifted"], settled["span_reads"], store.span_reads) == (5, 5, 0, 5)

    loop_thread.run(scenario())


def test_a_rollout_that_just_finished_is_read_again_until_it_settles(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = CountingStore()
        await finished_rollout(store, EXTENDS)
        drift = RunDrift(store, settle_seconds=3600.0)
        await drift.snapshot()
        await drift.snapshot()
        assert store.span_reads == 2

    loop_thread.run(scenario())


def test_the_store_server_answers_with_the_drift_and_refuses_a_bad_sample_size(loop_thread: LoopThread) -> None:
    from starlette.testclient import TestClient

    from agentlightning.store.http.server.app import ServerSettings, create_app

    async def scenario() -> None:
        store = InMemoryLightningStore()
        await finished_rollout(store, DRIFTS)
        client = TestClient(create_app(store, ServerSettings(api_key="secret")))
        assert client.get("/v1/agl/dashboard/drift").status_code == 401
        key = {"Authorization": "Bearer secret"}
        answer = client.get("/v1/agl/dashboard/drift?rollouts=50", headers=key)
        assert answer.status_code == 200 and (answer.json()["limit"], answer.json()["drifted"]) == (50, 1)
        refused = client.get("/v1/agl/dashboard/drift?rollouts=0", headers=key)
        assert (
            refused.status_code == 400 and "rollouts must be a whole number from 1 to 500" in refused.json()["detail"]
        )

    loop_thread.run(scenario())


def test_the_overview_flags_drift_and_the_conversation_says_which_call_drifted(
    page: Page, loop_thread: LoopThread
) -> None:
    store = InMemoryLightningStore()
    loop_thread.run(finished_rollout(store, EXTENDS))
    calls: list[Call] = [([1, 2], [3], None), ([1, 2, 3, 4], [5], None), ([1, 2, 3, 9], [6], None)]
    drifted = loop_thread.run(finished_rollout(store, calls))
    served = serve(loop_thread, store, RunData())
    try:
        view = page.open(f"{served.url}/#/")
        view.wait_for_selector("#drift.flagged")
        assert view.locator("#drift-rate").inner_text() == "33%"
        summary = view.locator("#drift-summary").inner_text()
        assert "1 of 3 calls that continued a conversation drifted, in 1 of 2 rollouts" in summary
        view.locator("#drift-flag a").click()
        view.wait_for_selector("#conversation-pane .continuity-note")
        notes = view.locator("#conversation-pane .continuity-note").all_inner_texts()
        assert notes[0].startswith("Starts a conversation")
        assert notes[1] == "Continues LLM call 1 exactly: one training sequence (LLM calls 1 and 2)."
        assert notes[2].startswith("Does not extend LLM call 2's token ids (its prompt departs from them at token 4)")
        assert "1 drifted · drift rate 50%" in view.locator("#conversation-pane .continuity-summary").inner_text()
        assert drifted in view.evaluate("location.hash")
    finally:
        loop_thread.run(served.server.stop())


def test_measuring_drift_does_not_load_torch_into_the_store_server() -> None:
    import subprocess
    import sys

    script = (
        "import sys; from agentlightning.dashboard.drift import rollout_drift; import agentlightning.dashboard.routes; "
        "from agentlightning.types import Rollout; "
        "rollout_drift(Rollout(rollout_id='ro-1', input={}, start_time=0.0, status='succeeded'), []); "
        "print('torch' in sys.modules)"
    )
    answer = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert answer.stdout.strip() == "False", answer.stderr
