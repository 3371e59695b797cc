"""APO and Baseline through the real Trainer: runner processes, the store served over HTTP ("cs"), threads ("shm")."""

from __future__ import annotations

import logging

import pytest

import agentlightning as agl
from agentlightning.algorithm.apo import APO

from ..fake_openai_server import FakeOpenAIServer
from .agents import rule_agent, rule_chat_agent
from .scripted import ScriptedOptimizer, category_tasks

SEED = "Task {id} in category {category}."
CATEGORIES = ["red", "green", "blue"]


def test_apo_improves_the_prompt_through_runner_processes_and_the_store_server(optimizer: ScriptedOptimizer) -> None:
    algorithm = APO(
        optimizer.client(),
        gradient_model="critic",
        apply_edit_model="editor",
        beam_width=2,
        branch_factor=2,
        gradient_batch_size=3,
        val_batch_size=4,
        beam_rounds=2,
        seed=7,
    )
    with FakeOpenAIServer() as agent_model:
        trainer = agl.Trainer(
            algorithm=algorithm,
            n_runners=2,
            strategy="cs",
            adapter=agl.TraceToMessages(),
            initial_resources={
                "prompt": agl.PromptTemplate(template=SEED, engine="f-string"),
                "llm": agl.LLM(endpoint=agent_model.base_url, model="agent-model"),
            },
            progress="off",
        )
        trainer.fit(rule_chat_agent, category_tasks(CATEGORIES, 3, "t"), val_dataset=category_tasks(CATEGORIES, 2, "v"))
    history = algorithm.get_history()
    assert history[0].score == 0.0  # the seed states no rule
    assert algorithm.best_score > history[0].score
    assert "Rule: " in algorithm.get_best_prompt().template
    assert algorithm.stats.rounds_completed == 2 and algorithm.stats.rollouts_unfinished == 0
    assert algorithm.stats.rollouts_without_reward == 0


def test_trainer_dev_runs_baseline_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.algorithm")
    prompt = agl.PromptTemplate(template=SEED + "\nRule: red.", engine="f-string")
    trainer = agl.Trainer(n_runners=1, strategy="shm", initial_resources={"prompt": prompt}, progress="off")
    trainer.dev(rule_agent, category_tasks(["red", "blue"], 1, "t"))
    assert "[Baseline] train: 2 rollouts (2 succeeded); mean reward 0.5000" in caplog.text
