"""`AgentLightningTrainer`: VERL's `RayPPOTrainer` whose rollouts are the agents' runs, read from the store.

VERL generates sequences itself; here the agents do, through the LLM proxy that routes their calls to VERL's vLLM
servers. Each step: push the policy's weights to the vLLM replicas, let the daemon enqueue the batch and wait for the
rollouts, build the training batch from their triplets (`batch.py`), put the replicas to sleep, then VERL's usual
PPO update (old/reference log-probs, values, KL-in-reward, advantages grouped by data id, critic and actor updates).
Rows whose prompt was too long are removed after the advantages are computed, and the batch is thinned at random to
a multiple of the PPO mini-batch size (metrics `training/n_triplets_prompt_too_long`,
`training/n_triplets_dropped_remainder`).

Written against verl 0.9 (the `verl` extra pins it); imported only inside the Ray actor. It needs GPUs and is not
exercised by this repository's CPU test suite (the conversion and the daemon are).
"""

from __future__ import annotations

import logging
import random
from typing import Any, Optional

import numpy as np
import torch
from omegaconf import OmegaConf  # type: ignore[import-not-found]
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto  # type: ignore[import-not-found]
from verl.trainer.ppo.core_algos import agg_loss  # type: ignore[import-not-found]
from verl.trainer.ppo.metric_utils import (  # type: ignore[import-not-found]
    compute_data_metrics,
    compute_throughout_metrics,
    compute_timing_metrics,
)
from verl.trainer.ppo.ray_trainer import (  # type: ignore[import-not-found]
    RayPPOTrainer,
    apply_kl_penalty,
    compute_advantage,
)
from verl.utils.debug import marked_timer  # type: ignore[import-not-found]
from verl.utils.metric import reduce_metrics  # type: ignore[import-not-found]
from verl.utils.tracking import Tracking  # type: ignore[import-not-found]

from agentlightning.adapter.triplet import TraceToTripletBase

from .batch import fill_missing_rollout_log_probs, rows_to_keep
from .daemon import AgentModeDaemon

__all__ = ["AgentLightningTrainer"]

logger = logging.getLogger(__name__)


class AgentLightningTrainer(RayPPOTrainer):  # type: ignore[misc]
    """RayPPOTrainer with agent rollouts from the store (see the module docstring).

    Extra args: `store` (reachable from this actor), `proxy_settings` (to build the LLM proxy here), `adapter`
    (a TraceToTripletBase; default TracerTraceToTriplet), `daemon_cls` (an AgentModeDaemon subclass),
    `initial_resources` (the Trainer's, published next to the policy).
    """

    def __init__(
        self,
        *args: Any,
        store: Any,
        proxy_settings: Optional[dict[str, Any]] = None,
        adapter: Optional[TraceToTripletBase] = None,
        daemon_cls: Optional[type] = None,
        initial_resources: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if adapter is not None and not isinstance(adapter, TraceToTripletBase):
            raise TypeError(f"VERL trains on triplets: the adapter must be a TraceToTripletBase, got {type(adapter)}")
        self.store = store
        self.proxy_settings = proxy_settings
        self.adapter = adapter
        self.daemon_cls = daemon_cls or AgentModeDaemon
        self.initial_resources = initial_resources
        self.daemon: Optional[AgentModeDaemon] = None
        self._rng = random.Random(int(self.config.data.get("seed", 1) or 1))

    # ------------------------------------------------------------------------------------------------ set-up
    def _make_daemon(self) -> AgentModeDaemon:
        from agentlightning.llm_proxy import LLMProxy

        agl = self.config.agentlightning
        rollout = self.config.actor_rollout_ref.rollout
        settings = dict(self.proxy_settings or {})
        settings.setdefault("port", agl.get("port"))
        proxy = LLMProxy(store=self.store, **settings)
        return self.daemon_cls(
            port=agl.get("port"),
            train_rollout_n=int(rollout.n),
            train_information={"model": self.config.actor_rollout_ref.model.path, "temperature": rollout.temperature},
            tokenizer=self.tokenizer,
            mini_batch_size=int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size),
            pad_token_id=self.tokenizer.pad_token_id,
            reward_fillna_value=float(agl.get("reward_fillna_value", 0.0)),
            failure_reward=agl.get("failure_reward"),
            llm_timeout_seconds=float(agl.get("llm_timeout_seconds", 1200.0)),
            llm_proxy=proxy,
            store=self.store,
            adapter=self.adapter,
            trace_aggregator=OmegaConf.to_container(agl.trace_aggregator, resolve=True),
            poll_interval=float(agl.get("poll_interval_seconds", 5.0)),
            initial_resources=self.initial_resources,
        )

    def _lengths(self) -> tuple[int, int]:
        aggregator = self.config.agentlightning.trace_aggregator
        if aggregator.get("level", "transition") == "trajectory":
            return int(aggregator.trajectory_max_prompt_length), int(aggregator.trajectory_max_response_length)
        return int(self.config.data.max_prompt_length), int(self.config.data.max_response_length)

    def _server_addresses(self) -> list[str]:
        return list(self.llm_server_manager.server_addresses)

    # ------------------------------------------------------------------------------------------------ validation
    def _validate(self, merged: bool = False) -> dict[str, float]:  # type: ignore[override]
        assert self.daemon is not None
        metrics: dict[str, float] = {}
        for batch in self.val_dataloader:
            self.checkpoint_manager.update_weights(self.global_steps)
            self.daemon.set_up_data_and_server(batch, self._server_addresses(), is_train=False)
            self.daemon.run_until_all_finished()
            self.checkpoint_manager.sleep_replicas()
            metrics = self.daemon.get_test_metrics()
            self.daemon.clear_data_and_server()
        return metrics

    # ------------------------------------------------------------------------------------------------ training
    def _rollout_correction(self, batch: Any, recorded: Any, metrics: dict[str, Any]) -> Any:
        """Measure the gap between the rollout's log-probs (recorded by the LLM proxy) and the actor's old log-probs,
        and hand the batch to verl's rollout correction (`algorithm.rollout_correction`, when configured)."""
        from agentlightning.algorithm.grpo.learning.sampler_gap import gap_totals

        old = batch.batch["old_log_probs"]
        recorded = recorded.to(old.device)
        rollout = fill_missing_rollout_log_probs(batch.batch["rollout_log_probs"], recorded, old)
        batch.batch["rollout_log_probs"] = rollout
        gap = gap_totals(old, rollout, recorded, batch.batch["response_mask"], cap=2.0)  # the cap is unused here
        metrics.update(
            {f"training/{k}": v for k, v in gap.metrics(corrected=False).items() if k != "sampler_correction"}
        )
        correction = self.config.algorithm.get("rollout_correction", None)
        if correction is None:
            return batch
        from verl.trainer.ppo.rollout_corr_helper import (  # type: ignore[import-not-found]
            apply_bypass_mode,
            compute_rollout_correction_and_add_to_batch,
        )

        if correction.get("bypass_mode", False):  # the rollout's log-probs are PPO's anchor
            policy_loss = self.config.actor_rollout_ref.actor.policy_loss
            apply_bypass_mode(batch=batch, rollout_corr_config=correction, policy_loss_config=policy_loss)
            return batch
        batch, correction_metrics = compute_rollout_correction_and_add_to_batch(batch, correction)
        metrics.update(correction_metrics)
        return batch

    def fit(self) -> None:  # type: ignore[override]
        tracker = Tracking(
            project_name=self.config.trainer.project_name,
            experiment_name=self.config.trainer.experiment_name,
            default_backend=self.config.trainer.logger,
            config=OmegaConf.to_container(self.config, resolve=True),
        )
        self.global_steps = 0
        self._load_checkpoint()
        self.daemon = self._make_daemon()
        try:
            if self.val_dataset is not None and len(self.val_dataset) and self.config.trainer.get("val_before_train"):
                tracker.log(data=self._validate(), step=self.global_steps)
                if self.config.trainer.get("val_only", False):
                    return
            self.global_steps += 1
            start_epoch = (self.global_steps - 1) // max(len(self.train_dataloader), 1)
            for epoch in range(start_epoch, self.config.trainer.total_epochs):
                for batch_dict in self.train_dataloader:
                    is_last_step = self.global_steps >= self.total_training_steps
                    metrics = self._train_step(batch_dict)
                    if self.config.trainer.test_freq > 0 and (
                        is_last_step or self.global_steps % self.config.trainer.test_freq == 0
                    ):
                        metrics.update(self._validate())
                    if self.config.trainer.save_freq > 0 and (
                        is_last_step or self.global_steps % self.config.trainer.save_freq == 0
                    ):
                        self._save_checkpoint()
                    metrics.update({"training/global_step": self.global_steps, "training/epoch": epoch})
                    tracker.log(data=metrics, step=self.global_steps)
                    if is_last_step:
                        return
                    self.global_steps += 1
        finally:
            self.daemon.close()

    def _train_step(self, batch_dict: dict[str, Any]) -> dict[str, Any]:
        assert self.daemon is not None
        metrics: dict[str, Any] = {}
        timing: dict[str, float] = {}
        max_prompt, max_response = self._lengths()
        with marked_timer("step", timing):
            with marked_timer("gen", timing):
                self.checkpoint_manager.update_weights(self.global_steps)
                self.daemon.set_up_data_and_server(batch_dict, self._server_addresses(), is_train=True)
                self.daemon.run_until_all_finished()
                grouped = self.config.algorithm.adv_estimator != "gae"  # advantages normalised within a data id
                rows = self.daemon.get_train_batch(max_prompt, max_response, skip_single_row_groups=grouped)
                self.checkpoint_manager.sleep_replicas()
                self.daemon.clear_data_and_server()
            metrics.update(rows.metrics)
            if len(rows) == 0:
                logger.warning("Step %d: no trainable rows (see the training/* metrics); skipped", self.global_steps)
                return metrics
            tensors = rows.to_tensors()
            scores = tensors.pop("token_level_scores")
            drop = tensors.pop("is_drop_mask")
            recorded = tensors.pop("rollout_log_probs_mask", None)
            batch = rows.to_data_proto()
            for key in ("token_level_scores", "is_drop_mask", "rollout_log_probs_mask"):
                if key in batch.batch:
                    batch.batch.pop(key)
            batch.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature
            batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()

            dp_size = self._get_dp_size(self.actor_rollout_wg, "actor")
            batch, pad_size = pad_dataproto_to_divisor(batch, dp_size)
            with marked_timer("old_log_prob", timing):
                old_log_prob, _mfu = self._compute_old_log_prob(batch)
                entropy = agg_loss(
                    loss_mat=old_log_prob.batch["entropys"],
                    loss_mask=batch.batch["response_mask"],
                    loss_agg_mode=self.config.actor_rollout_ref.actor.loss_agg_mode,
                )
                metrics["actor/entropy"] = entropy.detach().item()
                old_log_prob.batch.pop("entropys")
                batch = batch.union(old_log_prob)
            if self.use_reference_policy:
                with marked_timer("ref", timing):
                    batch = batch.union(self._compute_ref_log_prob(batch))
            if self.use_critic:
                with marked_timer("values", timing):
                    batch = batch.union(self._compute_values(batch))
            batch = unpad_dataproto(batch, pad_size=pad_size)
            if recorded is not None:
                batch = self._rollout_correction(batch, recorded, metrics)

            with marked_timer("adv", timing):
                batch.batch["token_level_scores"] = scores.to(batch.batch["responses"].device)
                if self.config.algorithm.use_kl_in_reward:
                    batch, kl_metrics = apply_kl_penalty(
                        batch, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=self.config.algorithm.kl_penalty
                    )
                    metrics.update(kl_metrics)
                else:
                    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
                batch = compute_advantage(
                    batch,
                    adv_estimator=self.config.algorithm.adv_estimator,
                    gamma=self.config.algorithm.gamma,
                    lam=self.config.algorithm.lam,
                    num_repeat=self.config.actor_rollout_ref.rollout.n,
                    norm_adv_by_std_in_grpo=self.config.algorithm.get("norm_adv_by_std_in_grpo", True),
                    config=self.config.algorithm,
                )
            # Drop over-long prompts only now, so the group statistics above saw every rollout.
            # VERL's actor consumes mini-batches of ppo_mini_batch_size * rollout.n rows; a smaller batch is cut to a
            # multiple of the data-parallel size instead.
            n_valid = int((~drop).sum().item())
            multiple = int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size) * int(
                self.config.actor_rollout_ref.rollout.n
            )
            keep = rows_to_keep(drop.tolist(), multiple if n_valid >= multiple else dp_size, self._rng)
            metrics["training/n_triplets_dropped_remainder"] = float(n_valid - len(keep))
            if not keep:
                logger.warning("Step %d: every row was dropped; skipped", self.global_steps)
                return metrics
            batch = batch.select_idxs(np.array(keep))
            if self.config.trainer.balance_batch:
                self._balance_batch(batch, metrics=metrics)

            if self.use_critic:
                with marked_timer("update_critic", timing):
                    metrics.update(reduce_metrics(self._update_critic(batch).meta_info["metrics"]))
            if self.config.trainer.critic_warmup <= self.global_steps:
                with marked_timer("update_actor", timing):
                    metrics.update(reduce_metrics(self._update_actor(batch).meta_info["metrics"]))
        metrics.update(compute_data_metrics(batch=batch, use_critic=self.use_critic))
        metrics.update(compute_timing_metrics(batch=batch, timing_raw=timing))
        metrics.update(
            compute_throughout_metrics(batch=batch, timing_raw=timing, n_gpus=self.resource_pool_manager.get_n_gpus())
        )
        return metrics
