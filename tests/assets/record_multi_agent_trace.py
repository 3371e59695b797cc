"""Records `multi_agent_trace.json`: a planner agent hands a task off to a coder agent that runs a tool, captured
with zero-code instrumentation (OpenAI Agents SDK + OpenAI SDK) against the fake server.

Rewards: 0.5 emitted inside the coder's `run_code` tool, 1.0 emitted after the run. Re-run with
`.venv/bin/python tests/assets/record_multi_agent_trace.py` after changing the capture mapping.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool  # noqa: E402

import agentlightning as agl  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402

OUTPUT = Path(__file__).with_name("multi_agent_trace.json")


@function_tool
def run_code(code: str) -> str:
    """Run a piece of Python code and report the outcome."""
    agl.emit_reward(0.5)
    return f"ok: {code}"


async def record() -> None:
    store = InMemoryLightningStore()
    tracer = agl.OtelTracer(instrument=True)
    tracer.init_worker(0, store)
    try:
        with FakeOpenAIServer() as server:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test")
            model = OpenAIChatCompletionsModel(model="fake-model", openai_client=client)
            coder = Agent(name="coder", instructions="Write and run code.", tools=[run_code], model=model)
            planner = Agent(name="planner", instructions="Plan, then hand off.", handoffs=[coder], model=model)
            rollout = await store.start_rollout(input={"task": "build a sorter"})
            async with tracer.trace_context(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id):
                await Runner.run(planner, "build a sorter")
                agl.emit_reward(1.0)
        spans = await store.query_spans(rollout.rollout_id)
    finally:
        tracer.teardown_worker(0)
    OUTPUT.write_text(json.dumps([span.model_dump(mode="json") for span in spans], indent=1) + "\n")
    print(f"wrote {len(spans)} spans to {OUTPUT}")


if __name__ == "__main__":
    asyncio.run(record())
