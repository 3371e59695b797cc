"""Zero-code capture of Pydantic AI: the integration switches on Pydantic AI's own OpenTelemetry GenAI tracing, so
an agent's runs are `invoke_agent <name>` spans that `agent_match` selects by the agent's name, while each model call
stays one LLM call (the OpenAI SDK's span, with token ids). An instrumentation the application set is left alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.adapter import TracerTraceToTriplet
from agentlightning.instrumentation import instrument_all, uninstrument_all

from ..fake_openai_server import FakeOpenAIServer
from .conftest import Capture

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
pytest.importorskip("openinference.instrumentation.openai", reason="the openai extra is not installed")

from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

ROOT = Path(__file__).resolve().parents[2]


def _default() -> Any:
    return getattr(Agent, "_instrument_default", None)


def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def _agent(server: FakeOpenAIServer, name: str, **options: Any) -> Agent[None, str]:
    model = OpenAIChatModel("fake-model", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
    return Agent(model, name=name, **options)


async def test_agents_are_named_by_their_own_spans_and_each_call_counts_once(
    llm_server: FakeOpenAIServer, capture: Capture
) -> None:
    researcher = _agent(llm_server, "researcher", tools=[lookup])
    writer = _agent(llm_server, "writer")

    async def agents() -> str:
        facts = await researcher.run("tell me about otters")
        answer = await writer.run(f"REPLY:{facts.output}")
        agl.emit_reward(1.0)
        return answer.output

    output, spans = await capture(agents)
    assert output == "final answer: facts about test"
    names = [span.name for span in spans]
    assert {"invoke_agent researcher", "invoke_agent writer", "execute_tool lookup"} <= set(names)
    assert names.count("openai.chat.completion") == 3  # the researcher's tool call and answer, the writer's answer

    everything = TracerTraceToTriplet().adapt(spans)
    assert len(everything) == 3 and all(t.prompt["token_ids"] and t.response["token_ids"] for t in everything)
    researcher_calls = TracerTraceToTriplet(agent_match="^researcher$").adapt(spans)
    writer_calls = TracerTraceToTriplet(agent_match="^writer$").adapt(spans)
    assert (len(researcher_calls), len(writer_calls)) == (2, 1)
    assert writer_calls[0].reward == 1.0


def test_the_integration_switches_pydantic_ais_tracing_on_without_content_and_off_again() -> None:
    assert not _default()
    assert instrument_all(["pydantic_ai"]) == {"pydantic_ai": True}
    try:
        settings = _default()
        assert isinstance(settings, InstrumentationSettings) and settings.include_content is False
    finally:
        uninstrument_all(["pydantic_ai"])
    assert _default() is False


def test_the_applications_own_instrumentation_is_kept_and_not_undone() -> None:
    mine = InstrumentationSettings()
    Agent.instrument_all(mine)
    try:
        instrument_all(["pydantic_ai"])
        assert _default() is mine
        uninstrument_all(["pydantic_ai"])
        assert _default() is mine
    finally:
        Agent.instrument_all(False)


def test_the_default_tracer_switches_it_on_when_the_agent_imports_pydantic_ai() -> None:
    code = """
        from agentlightning.instrumentation import LazyInstrumentation

        lazy = LazyInstrumentation()
        lazy.start()
        from pydantic_ai import Agent  # what an agent does inside its rollout
        on = bool(Agent._instrument_default)
        print("pydantic_ai" in lazy.instrumented, on)
        lazy.stop()
        print(Agent._instrument_default)
        """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:2] == ["True True", "False"]
