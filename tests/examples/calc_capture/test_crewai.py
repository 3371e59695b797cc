"""CrewAI, capture only: a crew whose "calculator" agent answers the calculator task with its tools, then a "checker"
agent reviews the answer, captured client-side (`OtelTracer(instrument=["openai", "crewai"])`) against the scripted
model. The crew runs through `LitAgentRunner` in CrewAI's own environment (`crewai_env.py`: crewai cannot share the
test environment with the OpenAI Agents SDK), the spans come back as JSON and are checked here like the other
frameworks': spans of the rollout, token ids on every LLM span, the tool calls and CrewAI's spans of the tool runs,
a triplet per calculator call with the reward on the last, one stitched sequence without drift, and `agent_match`
picking each agent's calls.

Building the environment the first time takes about two minutes (a 1 GB download); `AGL_SKIP_CREWAI=1` skips.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentlightning.adapter import TracerTraceToTriplet
from agentlightning.adapter.trajectory import stitch_calls
from agentlightning.algorithm.grpo.learning.samples import call_ids
from agentlightning.inference.server import InferenceServer
from agentlightning.types import Span

from . import crewai_env
from .harness import LLM_SPANS, MODEL, Scripts, completion_tool_calls, plan, tool_runs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def crewai_python() -> Iterator[Path]:
    if os.environ.get("AGL_SKIP_CREWAI"):
        pytest.skip("AGL_SKIP_CREWAI is set")
    pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    yield crewai_env.ensure()


@pytest.fixture(scope="module")
def crew_run(crewai_python: Path, model_server: InferenceServer, scripts: Scripts, tmp_path_factory: Any) -> Any:
    task = scripts.new_task()
    output = tmp_path_factory.mktemp("crew") / "rollout.json"
    script = Path(__file__).with_name("crew_rollout.py")
    result = subprocess.run(
        [str(crewai_python), str(script), model_server.endpoint, MODEL, json.dumps(task), str(output)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text())
    record["spans"] = [Span.model_validate(span) for span in record["spans"]]
    record["tools"] = plan(task)
    return record


@pytest.mark.timeout(1800)  # the first run builds CrewAI's environment
def test_a_tool_calling_crew_is_captured_with_token_ids(crew_run: Any) -> None:
    assert crew_run["status"] == "succeeded", crew_run["error"]
    spans: list[Span] = crew_run["spans"]
    assert all((s.rollout_id, s.attempt_id) == (crew_run["rollout_id"], crew_run["attempt_id"]) for s in spans)
    calls = sorted((s for s in spans if s.name in LLM_SPANS), key=lambda s: s.sequence_id)
    tools: list[str] = crew_run["tools"]
    assert len(calls) == len(tools) + 2  # the calculator's calls, the checker's one
    assert all(s.attributes.get("prompt_token_ids") and s.attributes.get("response_token_ids") for s in calls)
    assert [completion_tool_calls(s) for s in calls] == [[tool] for tool in tools] + [[], []]
    assert tool_runs(spans) == tools


@pytest.mark.timeout(1800)
def test_the_calculators_calls_are_triplets_in_one_sequence(crew_run: Any) -> None:
    spans: list[Span] = crew_run["spans"]
    tools: list[str] = crew_run["tools"]
    calculator = TracerTraceToTriplet(agent_match="^calculator$").adapt(spans)
    assert [t.reward for t in calculator] == [None] * len(tools) + [1.0]
    report = stitch_calls([call_ids(t) for t in calculator])
    assert (len(report.sequences), report.continuations, report.drifted) == (1, len(tools), 0)
    [checker] = TracerTraceToTriplet(agent_match="^checker$").adapt(spans)
    assert checker.metadata["response_id"] not in {t.metadata["response_id"] for t in calculator}
