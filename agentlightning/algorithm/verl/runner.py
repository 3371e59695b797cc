"""`TaskRunner`: the Ray actor that builds VERL's workers and datasets and runs `AgentLightningTrainer`.

Imported only by `run_ppo` (it imports ray and verl at module level). Worker setup (actor/rollout, critic, reference
policy, reward model, resource pools) is VERL's own `BaseTaskRunner` (verl 0.9); this class adds the datasets (the
in-memory lists handed to `VERL.run`, or `data.train_files` / `data.val_files` parquet files) and the store side.
"""

from __future__ import annotations

from typing import Any, Optional

import ray  # type: ignore[import-not-found]
from omegaconf import OmegaConf  # type: ignore[import-not-found]
from verl.trainer.main_ppo_v0 import BaseTaskRunner  # type: ignore[import-not-found]

from .dataset import LoadedDataset, collate_samples, read_parquet_tasks

__all__ = ["TaskRunner"]


@ray.remote(num_cpus=1)
class TaskRunner(BaseTaskRunner):  # type: ignore[misc]
    def run(  # type: ignore[override]
        self,
        config: Any,
        *,
        train_dataset: Optional[list[Any]],
        val_dataset: Optional[list[Any]],
        store: Any,
        proxy_settings: Optional[dict[str, Any]],
        adapter: Any,
        trainer_cls: Optional[type],
        daemon_cls: Optional[type],
        initial_resources: Optional[dict[str, Any]] = None,
    ) -> None:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy  # type: ignore[import-not-found]
        from verl.utils.config import omega_conf_to_dataclass, validate_config  # type: ignore[import-not-found]

        from .trainer import AgentLightningTrainer

        OmegaConf.resolve(config)
        actor_rollout_cls, ray_worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_ref_policy_worker(config, actor_rollout_cls)
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
        model_config = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        if train_dataset is None:
            train_dataset = read_parquet_tasks(config.data.train_files, "data.train_files")
        if val_dataset is None and config.data.get("val_files"):
            val_dataset = read_parquet_tasks(config.data.val_files, "data.val_files")
        cls = trainer_cls or AgentLightningTrainer
        if not issubclass(cls, AgentLightningTrainer):
            raise TypeError(f"trainer_cls must subclass AgentLightningTrainer, got {cls.__name__}")
        trainer = cls(
            config=config,
            tokenizer=model_config.tokenizer,
            processor=model_config.processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=self.init_resource_pool_mgr(config),
            ray_worker_group_cls=ray_worker_group_cls,
            train_dataset=LoadedDataset(train_dataset),
            val_dataset=LoadedDataset(val_dataset or []),
            collate_fn=collate_samples,
            store=store,
            proxy_settings=proxy_settings,
            adapter=adapter,
            daemon_cls=daemon_cls,
            initial_resources=initial_resources,
        )
        trainer.init_workers()
        trainer.fit()
