"""The dashboard over the store of a real `Trainer.fit` run: an OpenAI-SDK agent (zero-code capture) against the
fake model server, run by a runner thread, some tasks failing; and over a store whose clock differs from the
browser's."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import agentlightning as agl

from ..fake_openai_server import FakeOpenAIServer
from .conftest import LoopThread, Page, ServedRun, serve
from .run_data import RunData

pytest.importorskip("openai", reason="the agent uses the openai extra")

TASKS = [{"question": f"q{index}", "answer": str(index % 3), "broken": index % 4 == 3} for index in range(12)]


@agl.rollout
def answer_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    """Ask the model (the fake server echoes what follows REPLY:); a broken task raises like a parser would."""
    import openai

    client = openai.OpenAI(base_url=llm.endpoint, api_key="test", max_retries=0)
    reply = client.chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": f"{task['question']} REPLY: {task['answer']}"}]
    )
    text = reply.choices[0].message.content or ""
    if task["broken"]:
        raise ValueError("no number in the reply")
    return 1.0 if text == "1" else 0.0


@pytest.fixture(scope="module")
def real_run(loop_thread: LoopThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRun]:
    """The store of one Trainer.fit run (SQLite), served after the run by a store server, as `agl store` would."""
    db = Path(tmp_path_factory.mktemp("real-run")) / "run.db"
    with FakeOpenAIServer(token_ids="on_request") as server:
        trainer = agl.Trainer(
            algorithm=agl.Baseline(polling_interval=0.05, span_verbosity="none"),
            n_runners=1,
            strategy="shm",
            store=f"sqlite:///{db}",
            tracer=agl.OtelTracer(instrument=["openai"]),
            initial_resources={"llm": agl.LLM(endpoint=server.base_url, model="fake-model")},
            progress="off",
        )
        # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(trainer.fit, answer_agent, TASKS).result(timeout=300)
    store = agl.store_from_url(f"sqlite:///{db}")
    served = serve(loop_thread, store, RunData())
    try:
        yield served
    finally:
        loop_thread.run(served.server.stop())
        loop_thread.run(store.close())


def test_a_runners_failure_reads_as_the_exception_it_recorded(page: Page, real_run: ServedRun) -> None:
    view = page.open(f"{real_run.url}/#/")
    view.wait_for_selector("#failure-reasons table")
    reasons = view.locator("#failure-reasons td.reason").all_inner_texts()
    assert reasons == ["ValueError: no number in the reply"]
    assert view.locator("#failure-reasons td.num").all_inner_texts() == ["3"]


def test_the_overview_reads_rewards_and_failures_without_span_queries(page: Page, real_run: ServedRun) -> None:
    view = page.open(f"{real_run.url}/#/")
    view.wait_for_selector("#reward-latest")
    assert view.locator("#reward-chart figure").get_attribute("data-points") == str(2 * 9)  # 9 rewards + average
    assert [request.url for request in page.requests if "/v1/agl/spans" in request.url] == []


def test_the_whole_run_is_summarised_by_the_server(page: Page, real_run: ServedRun) -> None:
    view = page.open(f"{real_run.url}/#/")
    view.wait_for_selector("#whole-run-chart figure[data-points]")
    summary = view.locator("#whole-run-summary").inner_text()
    assert summary.startswith("12 finished rollouts · 9 with a reward · mean reward 0.3333"), summary
    assert int(view.locator("#whole-run-chart figure").get_attribute("data-points") or 0) >= 2


def test_a_failed_rollout_shows_its_exception_and_the_call_it_made(page: Page, real_run: ServedRun) -> None:
    view = page.open(f"{real_run.url}/#/rollouts?status=failed")
    view.wait_for_selector("#rollout-rows tr.rollout-row a")
    view.locator("#rollout-rows tr.rollout-row a").first.click()
    view.wait_for_selector(".attempt-reason")
    assert view.locator(".attempt-reason").first.inner_text() == "ValueError: no number in the reply"
    view.locator("button", has_text="Conversation").click()
    view.wait_for_selector(".llm-call")
    assert view.locator(".llm-call").count() == 1
    assert "token ids captured" in view.locator(".llm-call .token-ids").inner_text()


def test_runner_heartbeats_are_aged_on_the_servers_clock(page: Page, loop_thread: LoopThread) -> None:
    from agentlightning.store.core.clock import use_clock

    store = agl.InMemoryLightningStore()
    served = serve(loop_thread, store, RunData())
    try:
        with use_clock(lambda: time.time() - 3600):  # the store's machine is an hour behind the browser's
            loop_thread.run(store.update_worker("runner-behind", heartbeat_stats={"cpu_percent": 5.0}))
            view = page.open(f"{served.url}/#/runners")
            row = view.locator("#runner-rows tr.runner-row")
            row.wait_for()
            assert row.get_attribute("data-health") == "alive"
            assert re.fullmatch(r"just now|\d s ago", row.locator(".age").inner_text())
    finally:
        loop_thread.run(served.server.stop())


def test_count_axes_read_in_whole_numbers(page: Page, loop_thread: LoopThread) -> None:
    from agentlightning.store.core.clock import use_clock

    store = agl.InMemoryLightningStore()

    async def finish_one_at(when: float) -> None:
        with use_clock(lambda: when):
            rollout = await store.start_rollout(input={})
            await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")

    for offset in (0.0, 9.0, 20.0):  # one rollout per bucket at most: counts of 0 and 1
        loop_thread.run(finish_one_at(time.time() - 60 + offset))
    served = serve(loop_thread, store, RunData())
    try:
        view = page.open(f"{served.url}/#/")
        view.wait_for_selector("#throughput-chart figure[data-points]")
        script = "nodes => nodes.map((node) => node.textContent)"
        ticks = view.eval_on_selector_all("#throughput-chart .chart-tick", script)
        counts = [tick for tick in ticks if re.fullmatch(r"\d+", tick)]
        assert counts == ["0", "1"], ticks  # not "0, 0, 1, 1, 1"
    finally:
        loop_thread.run(served.server.stop())


def test_a_langchain_agents_calls_are_listed_once_each_with_their_token_ids(
    page: Page, loop_thread: LoopThread
) -> None:
    pytest.importorskip("langchain_openai", reason="the langchain extra is not installed")
    import openai
    from langchain_openai import ChatOpenAI

    store = agl.InMemoryLightningStore()

    async def capture(server: FakeOpenAIServer) -> str:
        model = ChatOpenAI(
            model="fake-model",
            base_url=server.base_url,
            api_key="test",  # type: ignore[arg-type]
            max_retries=0,
            http_async_client=openai.DefaultAsyncHttpxClient(),
        )
        tracer = agl.OtelTracer(instrument=["openai", "langchain"], flush_interval=0.05)
        tracer.init_worker(0, store)
        try:
            rollout = await store.start_rollout(input={"question": "three calls"})
            async with tracer.trace_context(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id):
                for word in ("one", "two", "three"):
                    await model.ainvoke([("user", f"REPLY: {word}")])
            return rollout.rollout_id
        finally:
            tracer.teardown_worker(0)

    with FakeOpenAIServer(token_ids="on_request") as server:
        rollout_id = loop_thread.run(capture(server))
    served = serve(loop_thread, store, RunData())
    try:
        view = page.open(f"{served.url}/#/rollouts/{rollout_id}?tab=conversation")
        view.wait_for_selector(".llm-call")
        cards = view.locator(".llm-call")
        assert cards.count() == 3
        assert all(text.startswith("token ids captured") for text in cards.locator(".token-ids").all_inner_texts())
    finally:
        loop_thread.run(served.server.stop())


def test_a_one_step_grpo_run_shows_its_reward_per_step_as_a_point(page: Page, loop_thread: LoopThread) -> None:
    async def one_step(store: agl.InMemoryLightningStore) -> None:
        resources = await store.add_resources({"p": agl.PromptTemplate(template="a", engine="f-string")})
        for reward in (0.0, 1.0):
            rollout = await store.start_rollout(
                input={}, resources_id=resources.resources_id, metadata={"grpo": {"step": 1, "version": 1}}
            )
            attempt = rollout.attempt.attempt_id
            await store.update_attempt(
                rollout.rollout_id, attempt, status="succeeded", metadata={"final_reward": reward}
            )

    store = agl.InMemoryLightningStore()
    loop_thread.run(one_step(store))
    served = serve(loop_thread, store, RunData())
    try:
        view = page.open(f"{served.url}/#/")
        view.wait_for_selector("#whole-run-versions figure[data-points]")
        assert view.locator("#whole-run-versions-title").inner_text() == "Mean reward per GRPO step"
        assert view.locator("#whole-run-versions .chart-single-point").count() >= 1  # the one step, drawn
        ticks = view.locator("#whole-run-versions svg text").evaluate_all("texts => texts.map((t) => t.textContent)")
        assert "step 1" in ticks and not [tick for tick in ticks if re.fullmatch(r"step \d+\.\d+", tick)]
    finally:
        loop_thread.run(served.server.stop())
