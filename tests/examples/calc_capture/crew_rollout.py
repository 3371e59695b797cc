"""One rollout of a CrewAI crew with the calculator task's tools, captured client-side; run by test_crewai.py with the
Python of the CrewAI environment (crewai cannot share an environment with the OpenAI Agents SDK: crewai 1.15 needs
openai<3, openai-agents 0.24 needs openai>=3).

    python crew_rollout.py ENDPOINT MODEL TASK_JSON OUTPUT_JSON

The crew: a "calculator" agent with the task's `multiply` and `add` tools answers the task's question, then a
"checker" agent (no tools) reviews the answer. The rollout runs through `LitAgentRunner` with
`OtelTracer(instrument=["openai", "crewai"])` on an in-memory store; the rollout's status, error and stored spans
are written to OUTPUT_JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # nothing leaves the machine
os.environ.setdefault("CREWAI_DISABLE_TRACKING", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "examples" / "calc_agent")]

import task as calc  # noqa: E402  (the calculator example's task module)

import agentlightning as agl  # noqa: E402
from agentlightning.runner import LitAgentRunner  # noqa: E402
from agentlightning.store import InMemoryLightningStore  # noqa: E402
from agentlightning.tracer.otel import OtelTracer  # noqa: E402

MAX_TOKENS = 200  # the scripted model's tokenizer spends a token per character


@agl.rollout
def crew_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    import crewai
    from crewai.tools import tool

    @tool("multiply")
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return calc.multiply(a, b)

    @tool("add")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return calc.add(a, b)

    model = crewai.LLM(
        model=f"openai/{llm.model}", base_url=llm.endpoint, api_key="unused", max_tokens=MAX_TOKENS, temperature=0.0
    )
    calculator = crewai.Agent(
        role="calculator",
        goal=calc.SYSTEM_PROMPT,
        backstory="You compute with tools.",
        llm=model,
        tools=[multiply, add],
        max_iter=calc.MAX_TURNS,
    )
    checker = crewai.Agent(role="checker", goal="Check answers.", backstory="You review.", llm=model)
    calculate = crewai.Task(description=calc.question(task), expected_output="the number", agent=calculator)
    check = crewai.Task(description="Is the answer right?", expected_output="yes or no", agent=checker)
    result = crewai.Crew(agents=[calculator, checker], tasks=[calculate, check]).kickoff()
    return calc.reward(result.tasks_output[0].raw, task)


async def main(endpoint: str, model: str, task: dict[str, Any], output: Path) -> None:
    store = InMemoryLightningStore()
    runner: LitAgentRunner[Any] = LitAgentRunner(tracer=OtelTracer(instrument=["openai", "crewai"]), max_rollouts=1)
    resources = await store.add_resources({"main_llm": agl.LLM(endpoint=endpoint, model=model)})
    queued = await store.enqueue_rollout(task, resources_id=resources.resources_id)
    with runner.run_context(agent=crew_agent, store=store):
        await runner.iter()
    [rollout] = await store.wait_for_rollouts(rollout_ids=[queued.rollout_id], timeout=30)
    attempt = await store.get_latest_attempt(rollout.rollout_id)
    assert attempt is not None
    spans = await store.query_spans(rollout.rollout_id)
    record = {
        "status": rollout.status,
        "error": (attempt.metadata or {}).get("error"),
        "rollout_id": rollout.rollout_id,
        "attempt_id": attempt.attempt_id,
        "spans": [span.model_dump(mode="json") for span in spans],
    }
    output.write_text(json.dumps(record))


if __name__ == "__main__":
    endpoint_arg, model_arg, task_arg, output_arg = sys.argv[1:5]
    asyncio.run(main(endpoint_arg, model_arg, json.loads(task_arg), Path(output_arg)))
