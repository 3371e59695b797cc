"""One LoRA adapter per agent: parsing `agent_match`, splitting a rollout's calls and rewards by agent, building each
agent's groups from its own calls and rewards, and training each adapter with its own optimizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.agents import (
    AgentMatchError,
    _split,
    agent_rewards,
    assign_calls,
    parse_agent_match,
)
from agentlightning.algorithm.grpo.rollouts.reading import SkipCounts
from agentlightning.types import Rollout, Span, Triplet

from ...adapter.spans import span

SOLVER_PROMPT, REVIEWER_PROMPT = [1, 2, 3], [1, 2, 4]


def llm_call(span_id: str, parent: str, start: float, prompt: list[int], response: list[int]) -> Span:
    return span(
        "openai.chat.completion",
        span_id,
        parent,
        start,
        start + 0.1,
        gen_ai__response__id=f"resp-{span_id}",
        prompt_token_ids=prompt,
        response_token_ids=response,
    )


def team_spans(solver_reward: Optional[float], reviewer_reward: Optional[float], final: float) -> list[Span]:
    """A rollout of the team: the solver's call and reward inside its span, then the reviewer's, then the final
    reward at the root."""
    spans = [
        span("rollout", "root", None, 0.0, 10.0),
        span("solve", "solve", "root", 1.0, 2.0, agent__name="solver"),
        llm_call("c1", "solve", 1.1, SOLVER_PROMPT, [7]),
        span("review", "review", "root", 3.0, 4.0, agent__name="reviewer"),
        llm_call("c2", "review", 3.1, REVIEWER_PROMPT, [8]),
        span("agentlightning.reward", "final", "root", 9.0, 9.0, reward=final),
    ]
    if solver_reward is not None:
        spans.append(span("agentlightning.reward", "r1", "solve", 1.5, 1.5, reward=solver_reward))
    if reviewer_reward is not None:
        spans.append(span("agentlightning.reward", "r2", "review", 3.5, 3.5, reward=reviewer_reward))
    return sorted(spans, key=lambda s: s.start_time or 0.0)  # in time order, as a store returns them


def rollout(index: int) -> Rollout:
    return Rollout(rollout_id=f"ro-{index}", input={"i": index}, start_time=0.0, status="succeeded")


AGENTS = {"solver": "^solver$", "reviewer": "^reviewer$"}

# ----------------------------------------------------------------------------------------------- agent_match forms


def test_a_single_pattern_keeps_the_single_policy_form() -> None:
    assert parse_agent_match("solver") is None
    assert parse_agent_match(None) is None


def test_a_list_of_names_gives_one_adapter_per_name() -> None:
    assert parse_agent_match(["solver", "reviewer"]) == {"solver": "solver", "reviewer": "reviewer"}


def test_a_dict_maps_adapter_names_to_patterns() -> None:
    assert parse_agent_match({"coder": "^code"}) == {"coder": "^code"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["^solver$"], "list entries are agent names"),
        (["solver", "solver"], "twice"),
        ([], "empty"),
        ({"solver": "("}, "not a valid regex"),
        ({"so lver": "x"}, "must be letters"),
    ],
)
def test_malformed_agent_match_is_rejected_with_the_reason(value: Any, message: str) -> None:
    with pytest.raises(AgentMatchError, match=message):
        parse_agent_match(value)


def test_several_agents_need_lora() -> None:
    from agentlightning.algorithm.grpo import GRPO

    with pytest.raises(ValueError, match="set lora_rank"):
        GRPO(agent_match=["solver", "reviewer"])


def test_several_agents_are_served_by_the_in_process_engine_only(tmp_path: Path) -> None:
    from agentlightning.algorithm.grpo import GRPO

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="leave server_url out"):
        GRPO(tmp_path, server_url="http://127.0.0.1:1/v1", output_dir=tmp_path, agent_match=["solver"], lora_rank=4)


def test_several_agents_can_be_served_by_vllm() -> None:
    from agentlightning.algorithm.grpo import GRPO

    algorithm = GRPO(serving="vllm", agent_match=["solver", "reviewer"], lora_rank=4)
    assert algorithm.serving == "vllm" and algorithm.agents == {"solver": "solver", "reviewer": "reviewer"}


def test_the_single_pattern_form_is_unchanged() -> None:
    from agentlightning.algorithm.grpo import GRPO

    algorithm = GRPO(agent_match="solver")
    assert algorithm.agent_match == "solver" and algorithm.agents is None


# ------------------------------------------------------------------------------------------------ calls and rewards


def test_each_call_goes_to_the_agent_around_it() -> None:
    calls = [Triplet(prompt={}, response={}, metadata={"agent_name": name}) for name in ("solver", "reviewer", "x")]
    assigned = assign_calls(calls, AGENTS)
    assert [c.metadata["agent_name"] for c in assigned["solver"]] == ["solver"]
    assert [c.metadata["agent_name"] for c in assigned["reviewer"]] == ["reviewer"]


def test_two_patterns_matching_one_call_is_an_error_naming_both() -> None:
    calls = [Triplet(prompt={}, response={}, metadata={"agent_name": "solver"})]
    with pytest.raises(AgentMatchError, match=r"\['solver', 'solv'\]"):
        assign_calls(calls, {"solver": "solver", "solv": "solv"})


def test_a_reward_emitted_inside_an_agents_span_is_that_agents() -> None:
    assert agent_rewards(team_spans(0.25, 1.0, final=0.5)) == {"solver": 0.25, "reviewer": 1.0}


def test_each_agent_gets_its_own_calls_and_reward() -> None:
    read = _split(rollout(0), team_spans(0.25, 1.0, final=0.5), AGENTS)
    [solver], [reviewer] = read.by_agent["solver"], read.by_agent["reviewer"]
    assert solver.reward == 0.25 and [c.prompt["token_ids"] for c in solver.calls] == [SOLVER_PROMPT]
    assert reviewer.reward == 1.0 and [c.prompt["token_ids"] for c in reviewer.calls] == [REVIEWER_PROMPT]
    assert read.merged[0].reward == 0.5 and len(read.merged[0].calls) == 2


def test_an_agent_without_a_reward_of_its_own_gets_the_final_reward_counted() -> None:
    read = _split(rollout(0), team_spans(0.25, None, final=0.5), AGENTS)
    assert read.by_agent["reviewer"][0].reward == 0.5
    assert read.rewards_from_rollout == {"reviewer": 1}


def test_a_pattern_matching_no_call_stops_the_step_naming_the_agents_seen() -> None:
    read = _split(rollout(0), team_spans(0.25, 1.0, final=0.5), {"solver": "^solver$", "writer": "^writer$"})
    with pytest.raises(AgentMatchError, match=r"writer: '\^writer\$'.*\['reviewer', 'solver'\]"):
        read.require_calls({"solver": "^solver$", "writer": "^writer$"}, step=1)


def test_each_agents_groups_are_built_from_its_own_rewards() -> None:
    """One group of two rollouts: the solver's rewards differ (it learns), the reviewer's are equal (it does not)."""
    reads = [
        _split(rollout(0), team_spans(1.0, 1.0, 0.0), AGENTS),
        _split(rollout(1), team_spans(0.0, 1.0, 0.0), AGENTS),
    ]
    reads[0].extend(reads[1])
    config = GRPOConfig(group_size=2)
    solver = build_samples(reads[0].by_agent["solver"], [0, 0], [0], SkipCounts(), config)
    reviewer = build_samples(reads[0].by_agent["reviewer"], [0, 0], [0], SkipCounts(), config)
    assert [s.prompt_ids for s in solver.samples] == [SOLVER_PROMPT, SOLVER_PROMPT]
    assert [s.advantage > 0 for s in solver.samples] == [True, False]
    assert reviewer.samples == [] and reviewer.informative_groups == 0


# ----------------------------------------------------------------------------------------------------- adapters


def test_each_agents_update_changes_only_its_own_adapter(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from agentlightning.algorithm.grpo.learning.agent_policy import AgentPolicies, run_agent_updates
    from agentlightning.algorithm.grpo.learning.loss import Sample
    from agentlightning.inference.tiny import build_tiny_engine

    policies = AgentPolicies.from_engine(
        build_tiny_engine(seed=0), GRPOConfig(lora_rank=4, learning_rate=1e-2), ["solver", "reviewer"]
    )
    before = {agent: policies.adapter_weights(agent) for agent in policies.agents}
    samples = [Sample([2, 10, 11], [12, 13], 1.0), Sample([2, 10, 11], [14], -1.0)]
    metrics = run_agent_updates(policies, {"solver": samples, "reviewer": []}, policies.config)
    assert set(metrics) >= {"solver.loss", "solver.grad_norm"} and not any(k.startswith("reviewer.") for k in metrics)
    after = {agent: policies.adapter_weights(agent) for agent in policies.agents}

    def changed(agent: str) -> bool:
        return any(not torch.equal(before[agent][k][1], after[agent][k][1]) for k in before[agent])

    assert changed("solver") and not changed("reviewer")


def test_agent_adapters_round_trip_through_a_checkpoint(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from agentlightning.algorithm.grpo.learning.agent_policy import AgentPolicies, run_agent_updates
    from agentlightning.algorithm.grpo.learning.checkpoint import load_checkpoint, save_checkpoint
    from agentlightning.algorithm.grpo.learning.loss import Sample
    from agentlightning.inference.tiny import build_tiny_engine

    def build() -> AgentPolicies:
        config = GRPOConfig(lora_rank=4, learning_rate=1e-2)
        return AgentPolicies.from_engine(build_tiny_engine(seed=0), config, ["solver", "reviewer"])

    trained = build()
    samples = [Sample([2, 10, 11], [12, 13], 1.0), Sample([2, 10, 11], [14], -1.0)]
    run_agent_updates(trained, {"solver": samples, "reviewer": samples}, trained.config)
    path = save_checkpoint(tmp_path, trained, 1, {"step": 1})  # type: ignore[arg-type]
    assert (path / "model" / "solver" / "adapter_model.safetensors").is_file()
    restored = build()
    load_checkpoint(path, restored)  # type: ignore[arg-type]
    for agent in ("solver", "reviewer"):
        saved, loaded = trained.adapter_weights(agent), restored.adapter_weights(agent)
        assert all(torch.equal(saved[k][1], loaded[k][1]) for k in saved)
