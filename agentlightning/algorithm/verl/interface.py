"""`VERL`: the Algorithm that trains the agent's model with VERL's PPO/GRPO on a GPU cluster through Ray.

Construction composes the packaged configuration (`config.yaml` here, which extends VERL's `ppo_trainer`) and merges
the user's dictionary on top, so every VERL key works as in VERL itself, plus the `agentlightning` section:

- `agentlightning.port`: the LLM proxy's port (null: a free one);
- `agentlightning.trace_aggregator.level`: `transition` | `trajectory`, with `trajectory_max_prompt_length` /
  `trajectory_max_response_length` (see `batch.py`);
- `agentlightning.reward_fillna_value`, `agentlightning.failure_reward`, `agentlightning.llm_timeout_seconds`,
  `agentlightning.poll_interval_seconds`.

Needs the `verl` extra (`pip install 'agentlightning[verl]'`, GPU machines); verl, hydra, ray and torch are imported
only here and in the launch path, with a clear message when they are missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from agentlightning.types import Dataset

from ..base import Algorithm
from .requirements import require_verl

__all__ = ["VERL", "check_datasets", "compose_config", "require_verl"]


def compose_config(overrides: Mapping[str, Any]) -> Any:
    """The packaged configuration (VERL's `ppo_trainer` + ours) with `overrides` merged on top (an OmegaConf
    DictConfig, struct mode off so new keys are accepted)."""
    require_verl()
    from hydra import compose, initialize_config_module  # type: ignore[import-not-found]
    from omegaconf import OmegaConf  # type: ignore[import-not-found]

    with initialize_config_module(config_module="agentlightning.algorithm.verl", version_base=None):
        base = compose(config_name="config")
    OmegaConf.set_struct(base, False)
    merged = OmegaConf.merge(base, OmegaConf.create(dict(overrides)))
    level = OmegaConf.select(merged, "agentlightning.trace_aggregator.level", default="transition")
    if level not in ("transition", "trajectory"):
        raise ValueError(f"agentlightning.trace_aggregator.level must be 'transition' or 'trajectory', got {level!r}")
    if OmegaConf.select(merged, "actor_rollout_ref.rollout.mode") != "async":
        raise ValueError("actor_rollout_ref.rollout.mode must be 'async': agents call the policy's vLLM servers")
    return merged


def check_datasets(config: Any, train_dataset: Optional[Dataset[Any]], val_dataset: Optional[Dataset[Any]]) -> None:
    """Refuse, before Ray starts, datasets VERL's trainer would reject after minutes of worker set-up: no training
    tasks, fewer training tasks than one batch (`data.train_batch_size`; the last partial batch is dropped), or no
    validation tasks (VERL's trainer requires a validation set)."""
    batch_size = int(config.data.get("gen_batch_size") or config.data.train_batch_size)
    if train_dataset is None:
        if not config.data.get("train_files"):
            raise ValueError("VERL needs training tasks: pass train_dataset or set data.train_files (parquet)")
    elif len(train_dataset) < batch_size:
        raise ValueError(
            f"The training dataset has {len(train_dataset)} tasks, fewer than one batch (data.train_batch_size="
            f"{batch_size}); lower data.train_batch_size or add tasks"
        )
    if val_dataset is None:
        if not config.data.get("val_files"):
            raise ValueError("VERL's trainer needs validation tasks: pass val_dataset or set data.val_files (parquet)")
    elif len(val_dataset) == 0:
        raise ValueError("The validation dataset is empty; VERL's trainer needs at least one validation task")


class VERL(Algorithm):
    """Train the agent's model with VERL (PPO, GRPO, REINFORCE++, ... as configured) on GPUs.

    Args:
        config: VERL configuration overrides as a nested dict (e.g. `{"actor_rollout_ref": {"model": {"path": ...}},
            "data": {"train_batch_size": 32}, "algorithm": {"adv_estimator": "grpo"}}`).
        trainer_cls: a subclass of `agentlightning.algorithm.verl.trainer.AgentLightningTrainer` to use instead.
        daemon_cls: a subclass of `AgentModeDaemon` to use instead.

    Raises:
        ImportError: the `verl` extra is not installed (the message says how to install it).
        TypeError: `config` is not a mapping.
    """

    def __init__(
        self, config: Mapping[str, Any], trainer_cls: Optional[type] = None, daemon_cls: Optional[type] = None
    ):
        if not isinstance(config, Mapping):
            raise TypeError(f"VERL(config) takes a dict of VERL settings, got {type(config).__name__}")
        self.config = compose_config(config)
        self.trainer_cls = trainer_cls
        self.daemon_cls = daemon_cls

    def run(self, train_dataset: Optional[Dataset[Any]] = None, val_dataset: Optional[Dataset[Any]] = None) -> None:
        """Launch VERL on Ray and train until `trainer.total_epochs` / `trainer.total_training_steps`."""
        from .entrypoint import run_ppo

        try:
            store = self.get_store()
        except ValueError:
            raise ValueError(
                "VERL needs a store (the v0.1 server mode is not supported): run it through agl.Trainer, or call "
                "set_store() with a store that Ray actors can reach (a LightningStoreServer or LightningStoreClient)"
            ) from None
        check_datasets(self.config, train_dataset, val_dataset)
        adapter: Any = None
        if self._adapter_ref is not None:
            adapter = self.get_adapter()
        run_ppo(
            self.config,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            store=store,
            llm_proxy=self.get_llm_proxy(),
            adapter=adapter,
            trainer_cls=self.trainer_cls,
            daemon_cls=self.daemon_cls,
            initial_resources=dict(self.get_initial_resources() or {}),
        )
