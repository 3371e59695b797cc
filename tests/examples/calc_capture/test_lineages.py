"""The calculator agent's history is append-only: with lineages counted, each of its rollouts (every framework,
either capture) is still one lineage, trained as the one multi-turn sample it was before, every generated token in
the loss."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts

from .harness import CAPTURES, FRAMEWORKS, SAMPLING, Rollouts, Scripts, agent_module

# The four frameworks the calculator is trained in (the capture-only ones such as smolagents and DSPy re-render their
# history as text, so their calls are separate sequences by design: test_capture_matrix covers them).
PACKAGES = {"openai": "openai", "langgraph": "langgraph", "agents-sdk": "agents", "autogen": "autogen_agentchat"}
assert set(PACKAGES) <= set(FRAMEWORKS)


@pytest.fixture(params=list(PACKAGES))
def framework(request: pytest.FixtureRequest) -> str:
    pytest.importorskip(PACKAGES[request.param], reason=f"the {request.param} framework is not installed")
    return request.param


@pytest.mark.parametrize("capture", CAPTURES)
async def test_a_calculator_rollout_is_one_lineage_trained_as_before(
    framework: str, capture: str, rollouts: Rollouts, scripts: Scripts
) -> None:
    outcome = await rollouts.run(agent_module(framework).calc_agent, scripts.new_task(), capture)
    assert outcome.rollout.status == "succeeded", outcome.error
    calls = outcome.triplets()
    assert len(calls) == 2  # the tool call, then the answer
    solved = RolloutData(outcome.rollout, 1.0, calls)
    failed = replace(solved, rollout=outcome.rollout.model_copy(update={"rollout_id": "other"}), reward=0.0)
    config = GRPOConfig(group_size=2, tasks_per_step=1, max_response_tokens=SAMPLING["max_tokens"])
    built = build_samples([solved, failed], [0, 0], [0], SkipCounts(), config)

    assert (built.drift.lineages, built.drift.lineages_per_rollout, built.drift.drifted) == (2, 1.0, 0)
    generated = sum(len(c.response["token_ids"]) for c in calls)
    assert (built.drift.generated_tokens, built.drift.trained_share) == (2 * generated, 1.0)
    last: Any = calls[-1]
    for sample in built.samples:  # what the stitching gave before lineages: the whole conversation, one sample
        assert sample.calls == 2
        assert sample.prompt_ids == calls[0].prompt["token_ids"]
        assert sample.prompt_ids + sample.response_ids == [*last.prompt["token_ids"], *last.response["token_ids"]]
        assert sample.trained_tokens == generated
