"""One `AgentLightningTrainer` step with VERL's real advantage and metric code, the GPU workers replaced by fakes.

Runs only where the `verl` extra is installed (no GPU needed): the daemon enqueues the batch in a real store, a
scripted runner answers, and the step builds rows, computes GRPO advantages grouped by data id, drops over-long
prompts and hands the actor update a batch of the right shape.
"""

from __future__ import annotations

import asyncio
import random
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from agentlightning.algorithm.verl.interface import require_verl

try:
    require_verl()
except ImportError:
    pytest.skip("needs the verl extra", allow_module_level=True)

import torch

from agentlightning.adapter import LlmProxyTraceToTriplet
from agentlightning.algorithm.verl.daemon import AgentModeDaemon
from agentlightning.llm_proxy import LLMProxy
from agentlightning.store.memory.store import InMemoryLightningStore

from .test_verl_daemon import proxy_call, reward_span, scripted_runner


async def alternating_runner(store: InMemoryLightningStore, expected: int) -> None:
    """The first rollout of each task earns 1, the second 0; task {"x": k, "long": True} gets a 4-token prompt."""
    seen: dict[str, int] = {}
    done = 0
    while done < expected:
        claimed = await store.dequeue_rollout(worker_id="w1")
        if claimed is None:
            await asyncio.sleep(0.01)
            continue
        task: Any = claimed.input
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        copy = seen.get(task["data_id"], 0)
        seen[task["data_id"]] = copy + 1
        prompt = [100, 101, 102, task["x"]] if task.get("long") else [100, task["x"]]
        await store.add_span(proxy_call(rid, aid, 1, prompt, [task["x"]]))
        await store.add_span(reward_span(rid, aid, 2, 1.0 if copy == 0 else 0.0))
        await store.update_attempt(rid, aid, status="succeeded")
        done += 1


def make_trainer(store: InMemoryLightningStore, updates: list[Any]) -> Any:
    from verl import DataProto  # type: ignore[import-not-found]

    from agentlightning.algorithm.verl import compose_config
    from agentlightning.algorithm.verl.trainer import AgentLightningTrainer

    config = compose_config(
        {
            "algorithm": {"adv_estimator": "grpo"},
            "data": {"train_batch_size": 2, "max_prompt_length": 3, "max_response_length": 2},
            "actor_rollout_ref": {
                "model": {"path": "policy"},
                "rollout": {"n": 2},
                "actor": {"ppo_mini_batch_size": 1},
            },
            "trainer": {"balance_batch": False, "critic_warmup": 0},
        }
    )
    trainer: Any = object.__new__(AgentLightningTrainer)
    trainer.config = config
    trainer.global_steps = 1
    trainer.use_reference_policy = False
    trainer.use_critic = False
    trainer.actor_rollout_wg = None
    trainer._rng = random.Random(0)
    trainer._get_dp_size = lambda worker_group, role: 1
    trainer.checkpoint_manager = SimpleNamespace(update_weights=lambda step: None, sleep_replicas=lambda: None)
    trainer.llm_server_manager = SimpleNamespace(server_addresses=["127.0.0.1:9"])
    trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)

    def old_log_prob(batch: Any) -> tuple[Any, float]:
        shape = batch.batch["responses"].shape
        return DataProto.from_dict({"old_log_probs": torch.zeros(shape), "entropys": torch.ones(shape)}), 0.0

    def update_actor(batch: Any) -> Any:
        updates.append(batch)
        return DataProto(meta_info={"metrics": {"actor/pg_loss": [0.5]}})

    trainer._compute_old_log_prob = old_log_prob
    trainer._update_actor = update_actor
    trainer.daemon = AgentModeDaemon(
        train_rollout_n=2,
        train_information={"model": "policy"},
        pad_token_id=0,
        llm_proxy=LLMProxy(store=store),
        store=store,
        adapter=LlmProxyTraceToTriplet(),
        poll_interval=0.05,
    )
    return trainer


def run_step(trainer: Any, store: InMemoryLightningStore, batch: dict[str, Any], runner: Any) -> dict[str, Any]:
    thread = threading.Thread(target=lambda: asyncio.run(runner), daemon=True)
    thread.start()
    try:
        return trainer._train_step(batch)
    finally:
        thread.join(timeout=60)
        trainer.daemon.close()
        if trainer.daemon.llm_proxy.is_running():
            trainer.daemon.llm_proxy.stop()


def test_group_advantages_are_normalised_within_each_task_and_long_prompts_are_dropped_afterwards() -> None:
    store = InMemoryLightningStore()
    updates: list[Any] = []
    trainer = make_trainer(store, updates)
    metrics = run_step(trainer, store, {"x": [3, 5], "long": [False, True]}, alternating_runner(store, 4))
    (batch,) = updates
    # Task 5's prompts (4 tokens > max_prompt_length 3) were dropped after the advantages were computed.
    assert metrics["training/n_triplets_prompt_too_long"] == 2
    assert len(batch) == 2
    assert batch.batch["responses"][:, 0].tolist() == [3, 3]
    # Rewards 1 and 0 in each group: GRPO gives +-1/sqrt(2) (mean 0.5, unbiased std 0.707) on the trained token.
    advantages = sorted(batch.batch["advantages"][:, 0].tolist())
    assert advantages == pytest.approx([-0.7071, 0.7071], abs=1e-3)
    assert batch.batch["advantages"][:, 1].tolist() == [0.0, 0.0]  # padding carries no advantage


def test_a_training_step_computes_group_advantages_and_updates_the_actor() -> None:
    store = InMemoryLightningStore()
    updates: list[Any] = []
    trainer = make_trainer(store, updates)
    runner = threading.Thread(target=lambda: asyncio.run(scripted_runner(store, 4)), daemon=True)
    runner.start()
    try:
        metrics = trainer._train_step({"x": [3, 5]})
    finally:
        runner.join(timeout=60)
        trainer.daemon.close()
        if trainer.daemon.llm_proxy.is_running():
            trainer.daemon.llm_proxy.stop()
    (batch,) = updates
    assert len(batch) == 4  # 2 tasks x n=2, one call each, a multiple of ppo_mini_batch_size * n
    assert metrics["training/n_triplets"] == 4
    assert metrics["actor/pg_loss"] == 0.5
    # The scripted runner gives every rollout of a task the same reward: GRPO advantages are zero within each group.
    assert torch.allclose(batch.batch["advantages"], torch.zeros_like(batch.batch["advantages"]))
    scores = batch.batch["token_level_scores"].sum(-1).tolist()
    assert sorted(scores) == pytest.approx([0.3, 0.3, 0.5, 0.5])


def test_fit_validates_trains_and_validates_again_after_the_last_step(tmp_path: Any) -> None:
    store = InMemoryLightningStore()
    updates: list[Any] = []
    trainer = make_trainer(store, updates)
    daemon = trainer.daemon
    trainer._make_daemon = lambda: daemon
    trainer.config.trainer.default_local_dir = str(tmp_path)
    trainer.config.trainer.logger = ["console"]
    trainer.config.trainer.val_before_train = True
    trainer.config.trainer.test_freq = 1
    trainer.config.trainer.save_freq = -1
    trainer.config.trainer.total_epochs = 1
    trainer.train_dataloader = [{"x": [3, 5]}]
    trainer.val_dataset = [{"x": 7}]
    trainer.val_dataloader = [{"x": [7]}]
    trainer.total_training_steps = 1
    # validation before training (1 rollout), the step (4), validation after the last step (1)
    runner = threading.Thread(target=lambda: asyncio.run(alternating_runner(store, 6)), daemon=True)
    runner.start()
    try:
        trainer.fit()
    finally:
        runner.join(timeout=60)
        if daemon.llm_proxy.is_running():
            daemon.llm_proxy.stop()
    assert len(updates) == 1
    assert trainer.global_steps == 1
    rollouts = asyncio.run(store.query_rollouts())
    assert sorted(r.mode or "" for r in rollouts) == ["train"] * 4 + ["val"] * 2
