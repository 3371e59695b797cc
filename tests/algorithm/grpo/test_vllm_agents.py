"""Several agents trained through vLLM, one LoRA adapter each, against the fake vLLM (tests/algorithm/grpo/fake_vllm.py):
each agent's adapter loaded per version as `<agent>@step-N`, the proxy routing each agent to its newest adapter, the
previous one kept a step, older ones unloaded, and the errors that name the agent and the server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from agentlightning.algorithm.grpo import GRPOConfig
from agentlightning.algorithm.grpo.learning.agent_policy import AgentPolicies
from agentlightning.algorithm.grpo.rollouts.agents import AgentMatchError
from agentlightning.algorithm.grpo.serving.base import ServingError
from agentlightning.algorithm.grpo.serving.routing import model_entries
from agentlightning.algorithm.grpo.serving.vllm import VllmServing, build_vllm_serving
from agentlightning.algorithm.grpo.trained import AgentAdapters, OnePolicy
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer.otel import OtelTracer

from .agents import digit_team
from .fake_vllm import FakeVllm
from .vllm_runs import train_on_vllm

AGENTS = ["solver", "reviewer"]


def team_policies(folder: Path) -> AgentPolicies:
    return AgentPolicies.from_pretrained(folder, GRPOConfig(lora_rank=4), AGENTS)


def serving_for(fake: FakeVllm, folder: Path, tmp_path: Path) -> VllmServing:
    serving = VllmServing(folder, tmp_path / "published", lora=True, url=fake.url)
    serving.start()
    return serving


def proxy_requests(store: InMemoryLightningStore) -> list[str]:
    """The model of every request the proxy sent upstream, as its spans recorded it."""

    async def read() -> list[str]:
        models: list[str] = []
        for rollout in await store.query_rollouts():
            for span in await store.query_spans(rollout.rollout_id):
                request = span.attributes.get("agentlightning.llm.request")
                if request:
                    models.append(json.loads(str(request))["model"])
        return models

    return asyncio.run(read())


def upstreams(entries: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """`{(model name, agent or ""): upstream model}` of the proxy's entries."""
    return {
        (e["model_name"], e.get("agent", "")): e["litellm_params"]["model"].removeprefix("hosted_vllm/")
        for e in entries
    }


# ------------------------------------------------------------------------------------------- adapters
def test_each_agents_adapter_is_loaded_under_its_own_name_for_every_version(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    policies = team_policies(tiny_folder)
    for step in (1, 2):
        serving.publish_agents(policies, f"step-{step}")
    assert fake.loads == ["solver@step-1", "reviewer@step-1", "solver@step-2", "reviewer@step-2"]
    assert (
        serving.agent_upstream("solver") == "solver@step-2" and serving.agent_upstream("reviewer") == "reviewer@step-2"
    )
    assert serving.upstream_model == "policy"  # the base model's name still goes to the base model
    for agent in AGENTS:  # the agent's adapter alone, as vLLM loads it
        folder = tmp_path / "published" / agent / "step-2"
        names = {p.name for p in folder.iterdir()}
        assert {"adapter_config.json", "adapter_model.safetensors"} <= names and agent not in names


def test_each_agent_keeps_its_previous_adapter_and_older_ones_are_unloaded(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    policies = team_policies(tiny_folder)
    for step in (1, 2, 3):
        serving.publish_agents(policies, f"step-{step}")
    assert fake.unloads == ["solver@step-1", "reviewer@step-1"]
    assert sorted(fake.adapters) == ["reviewer@step-2", "reviewer@step-3", "solver@step-2", "solver@step-3"]
    for agent in AGENTS:
        assert sorted(p.name for p in (tmp_path / "published" / agent).iterdir()) == ["step-2", "step-3"]


def test_the_proxy_routes_each_agent_to_its_newest_adapter_and_other_calls_to_the_base_model(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    before = upstreams(model_entries(serving, AGENTS))
    assert set(before.values()) == {"policy"}  # no adapter yet: a fresh adapter is the base model
    serving.publish_agents(team_policies(tiny_folder), "step-1")
    assert upstreams(model_entries(serving, AGENTS)) == {
        ("policy", ""): "policy",  # agents not trained, and calls without the header, keep the base model
        ("solver", ""): "solver@step-1",
        ("policy", "solver"): "solver@step-1",  # the base model's name with the header x-agl-agent: solver
        ("reviewer", ""): "reviewer@step-1",
        ("policy", "reviewer"): "reviewer@step-1",
    }


def test_an_agent_named_like_the_served_model_is_refused(fake: FakeVllm, tiny_folder: Path, tmp_path: Path) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    with pytest.raises(ValueError, match="agent 'policy' has the name of the served model"):
        model_entries(serving, ["solver", "policy"])


def test_a_refused_agent_adapter_names_the_agent_and_the_server(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    fake.refuse_loads = "LoRA rank 4 is greater than max_lora_rank 2"
    with pytest.raises(ServingError) as raised:
        serving.publish_agents(team_policies(tiny_folder), "step-1")
    message = str(raised.value)
    assert "refused the LoRA adapter 'solver@step-1' of agent 'solver'" in message
    assert f"vLLM at {fake.url}" in message and "max_lora_rank 2" in message
    assert serving.agent_upstream("solver") == "policy"  # still routed to what is served


def test_an_adapter_name_a_server_given_by_url_already_holds_is_replaced(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    policies = team_policies(tiny_folder)
    serving_for(fake, tiny_folder, tmp_path / "earlier").publish_agents(policies, "step-1")  # an earlier run's
    serving = serving_for(fake, tiny_folder, tmp_path / "resumed")
    serving.publish_agents(policies, "step-1")
    assert fake.unloads == ["solver@step-1", "reviewer@step-1"]
    assert fake.adapters["solver@step-1"] == str((tmp_path / "resumed" / "published" / "solver" / "step-1").resolve())


def test_a_server_started_here_batches_two_adapters_per_agent(tiny_folder: Path, tmp_path: Path) -> None:
    config = GRPOConfig(lora_rank=4)
    team = AgentAdapters({agent: agent for agent in AGENTS})
    policies, serving = build_vllm_serving(tiny_folder, tmp_path, config, {"command": sys.executable}, team)
    assert isinstance(policies, AgentPolicies) and policies.agents == AGENTS
    command, env = serving.launch_command(8000)
    assert command[command.index("--max-loras") + 1] == "4"
    assert "--enable-lora" in command and env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    _, single = build_vllm_serving(
        tiny_folder, tmp_path, config, {"command": sys.executable}, OnePolicy(None, lambda: None)
    )
    assert single.max_loras == 2  # one policy: its newest and previous adapter


# ---------------------------------------------------------------------------------------------- in GRPO
def test_two_agents_train_through_vllm_each_on_its_newest_adapter_recorded_in_its_spans(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    store = InMemoryLightningStore()
    algorithm = train_on_vllm(
        digit_team,
        [{"id": i} for i in range(4)],
        model=tiny_folder,
        vllm={"url": fake.url},
        output_dir=tmp_path / "run",
        agent_match=AGENTS,
        tracer=OtelTracer(instrument=["openai"]),
        store=store,
        lora_rank=4,
        learning_rate=3e-2,
        truncated="keep",  # the tiny random model's answers run to max_tokens
    )
    assert [entry["step"] for entry in algorithm.history] == [1, 2]
    for entry in algorithm.history:
        assert entry["agents"]["solver"]["calls"] == entry["agents"]["reviewer"]["calls"] == entry["rollouts"] == 8
    updated = [entry["step"] for entry in algorithm.history if entry["samples"]]
    assert updated, "the digit reward varies, so a step updates"
    assert fake.loads == [f"{agent}@step-{step}" for step in updated for agent in AGENTS]
    first, second = fake.chat_models[:24], fake.chat_models[24:48]  # 8 rollouts of 3 calls per step
    assert set(first) == {"policy"}  # step 1 samples the base model: no adapter is loaded yet
    if updated[0] == 1:  # step 2: each trained agent on its step-1 adapter, the greeter on the base model
        assert sorted(set(second)) == ["policy", "reviewer@step-1", "solver@step-1"]
        assert second.count("policy") == second.count("solver@step-1") == second.count("reviewer@step-1") == 8
    assert sorted(set(proxy_requests(store))) == sorted(set(fake.chat_models))  # each span names its adapter


def test_an_agent_whose_pattern_matches_no_call_stops_the_run_naming_it(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    with pytest.raises(AgentMatchError, match=r"writer: 'writer'.*matched none of the step's LLM calls"):
        train_on_vllm(
            digit_team,
            [{"id": i} for i in range(2)],
            model=tiny_folder,
            vllm={"url": fake.url},
            output_dir=tmp_path / "run",
            agent_match=["solver", "reviewer", "writer"],  # the team has no writer
            tracer=OtelTracer(instrument=["openai"]),
            lora_rank=4,
            max_steps=1,
        )
    assert fake.loads == []  # nothing was trained, nothing loaded
