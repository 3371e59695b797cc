"""The dashboard over a real run whose calls went through the LLM proxy with client capture on as well: each call
is recorded twice (the client's span and the proxy's), and the conversation lists it once, with both sources."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import agentlightning as agl

from ..fake_openai_server import FakeOpenAIServer, free_port
from .conftest import LoopThread, Page, serve
from .run_data import RunData

pytest.importorskip("openai", reason="the agent uses the openai extra")


@agl.rollout
def three_questions(task: dict[str, Any], llm: agl.LLM) -> float:
    """Three calls through the proxy (the LLM resource is the proxy's), each a conversation of its own."""
    import openai

    client = openai.OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=0)
    for word in ("one", "two", "three"):
        client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": f"REPLY: {word}"}])
    return 1.0


def test_each_call_of_a_proxied_run_with_client_capture_is_listed_once(page: Page, loop_thread: LoopThread) -> None:
    store = agl.InMemoryLightningStore()
    with FakeOpenAIServer(token_ids="on_request") as server:
        model = [{"model_name": "policy", "litellm_params": {"model": "fake-model", "api_base": server.base_url}}]
        proxy = agl.LLMProxy(port=free_port(), model_list=model, store=store)  # type: ignore[arg-type]
        trainer = agl.Trainer(
            strategy="shm",
            store=store,
            llm_proxy=proxy,
            tracer=agl.OtelTracer(instrument=["openai"]),
            initial_resources={"llm": proxy.as_resource()},
            progress="off",
        )
        with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop running in this thread
            pool.submit(trainer.dev, three_questions, [{"q": 1}]).result(timeout=300)
    [rollout] = loop_thread.run(store.query_rollouts())
    spans = loop_thread.run(store.query_spans(rollout.rollout_id))
    assert sum(1 for span in spans if span.name == "openai.chat.completion") == 6  # client + proxy, per call
    served = serve(loop_thread, store, RunData())
    try:
        view = page.open(f"{served.url}/#/rollouts/{rollout.rollout_id}?tab=conversation")
        view.wait_for_selector(".llm-call")
        cards = view.locator(".llm-call")
        assert cards.count() == 3
        notes = cards.locator(".llm-sources").all_inner_texts()
        assert (
            notes
            == ["One call, recorded by the client and the LLM proxy: shown once, from the LLM proxy's record."] * 3
        )
        assert "prompt again" not in view.locator("#conversation-pane").inner_text()
    finally:
        loop_thread.run(served.server.stop())
