"""`AgentPolicies`: one LoRA adapter per agent on one shared, frozen base model, each with its own optimizer.

The adapters are named after the agents (PEFT adapters of one `PeftModel`). `view(agent)` is what one update trains:
it activates that agent's adapter (only its parameters require gradients) and carries that agent's AdamW optimizer,
so `update.apply_update(policies.view(agent), ...)` is exactly a single-policy GRPO update of that adapter.
`adapter_weights(agent)` gives the `(A, B)` pairs an inference engine serves beside the base model
(`InferenceEngine.load_adapter`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Optional, Union

from agentlightning.utils.device import autocast, compute_dtype, resolve_device

from ..config import GRPOConfig
from .policy import PolicyError, _quiet_saves, _require_peft

__all__ = ["AgentPolicies", "AgentView", "run_agent_updates"]

_PEFT_PREFIX = "base_model.model."

logger = logging.getLogger(__name__)


class AgentPolicies:
    """The trainable adapters of `agents` on `model` (moved to `config.device`, frozen; LoRA rank from `config`)."""

    lora = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        config: GRPOConfig,
        agents: list[str],
        *,
        base_model_path: Optional[str] = None,
    ) -> None:
        import torch

        lora = config.lora
        if lora.lora_rank is None:
            raise PolicyError("One adapter per agent needs LoRA: set lora_rank (e.g. 8)")
        if not agents:
            raise PolicyError("AgentPolicies needs at least one agent")
        peft = _require_peft()
        self.config = config
        self.tokenizer = tokenizer
        self.base_model_path = base_model_path
        self.agents = list(agents)
        self.device = resolve_device(config.compute.device)
        self.compute_dtype = compute_dtype(self.device, config.compute.precision)
        self.scale = float(lora.lora_alpha or 2 * lora.lora_rank) / lora.lora_rank
        lora_config = peft.LoraConfig(
            r=lora.lora_rank,
            lora_alpha=lora.lora_alpha or 2 * lora.lora_rank,
            target_modules=lora.lora_target_modules or "all-linear",
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        )
        model = model.to(device=self.device, dtype=torch.float32)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
            model = peft.get_peft_model(model, lora_config, adapter_name=self.agents[0])
            for agent in self.agents[1:]:
                model.add_adapter(agent, lora_config)
        self.model = model
        self.model.train()
        self.optimizers: dict[str, Any] = {}
        for agent in self.agents:
            parameters = self._parameters(agent)
            if not parameters:
                raise PolicyError(f"The adapter of agent {agent!r} has no parameters")
            for parameter in parameters:
                parameter.requires_grad_(True)
            self.optimizers[agent] = torch.optim.AdamW(
                parameters,
                lr=config.effective_learning_rate,
                weight_decay=config.optimizer.weight_decay,
                betas=(0.9, 0.99),
            )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is None:
            raise PolicyError("The tokenizer has neither a pad token nor an end-of-sequence token")
        self.pad_token_id = int(pad)

    @classmethod
    def from_engine(cls, engine: Any, config: GRPOConfig, agents: list[str]) -> AgentPolicies:
        """Adapters on the model an `InferenceEngine` serves: on its very tensors when it holds them in float32 on
        the policies' device (the base is frozen and never merged: the engine serves the adapters beside it), else
        on a copy of them (a bfloat16 engine, or one on another device)."""
        from .shared_base import model_on_same_tensors, why_not_shared

        reason = why_not_shared(engine, config)
        if reason is not None:
            logger.info("The agents' adapters are trained on a copy of the engine's model: %s", reason)
        model = copy.deepcopy(engine.model) if reason is not None else model_on_same_tensors(engine.model)
        path = getattr(getattr(engine.model, "config", None), "_name_or_path", None) or None
        return cls(model, engine.tokenizer, config, agents, base_model_path=path)

    @classmethod
    def from_pretrained(cls, path: Union[str, Path], config: GRPOConfig, agents: list[str]) -> AgentPolicies:
        """Adapters on a transformers model folder."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(path)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        return cls(model, tokenizer, config, agents, base_model_path=str(folder))

    def _parameters(self, agent: str) -> list[Any]:
        markers = (f".lora_A.{agent}.", f".lora_B.{agent}.")
        return [p for name, p in self.model.named_parameters() if any(m in name for m in markers)]

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """bfloat16 autocast when `precision` asks for it (or, under "auto", on a CUDA device that supports it), as
        the single policy's `Policy.autocast`."""
        return autocast(self.device, self.compute_dtype)

    def trainable_parameters(self, agent: Optional[str] = None) -> int:
        """Parameters of `agent`'s adapter (None: of every adapter)."""
        agents = [agent] if agent is not None else self.agents
        return sum(p.numel() for a in agents for p in self._parameters(a))

    def view(self, agent: str) -> AgentView:
        """The policy one update of `agent` trains (activates its adapter)."""
        if agent not in self.optimizers:
            raise KeyError(f"No adapter for agent {agent!r} (agents: {self.agents})")
        self.model.set_adapter(agent)
        for parameter in self._parameters(agent):
            parameter.requires_grad_(True)
        return AgentView(self, agent)

    def keep_reference(self) -> None:
        """Nothing to keep: the reference is the base model (adapters disabled)."""

    # ----------------------------------------------------------------------------------------------- serving
    def adapter_weights(self, agent: str) -> dict[str, tuple[Any, Any]]:
        """`{layer name in the base model: (A, B)}` of `agent`'s adapter: detached copies (their scale: `scale`)."""
        from peft.tuners.lora import LoraLayer

        weights: dict[str, tuple[Any, Any]] = {}
        for name, module in self.model.named_modules():
            if not isinstance(module, LoraLayer):
                continue
            lora_a: Any = module.lora_A  # ModuleDicts keyed by adapter name
            lora_b: Any = module.lora_B
            if agent in lora_a:
                layer = name[len(_PEFT_PREFIX) :] if name.startswith(_PEFT_PREFIX) else name
                weights[layer] = (lora_a[agent].weight.detach().clone(), lora_b[agent].weight.detach().clone())
        if not weights:
            raise KeyError(f"No adapter for agent {agent!r} (agents: {self.agents})")
        return weights

    # ------------------------------------------------------------------------------------------- persistence
    def save_model(self, folder: Path) -> None:
        """One PEFT adapter folder per agent (`folder/<agent>/`) and the tokenizer."""
        _quiet_saves()
        self.model.save_pretrained(str(folder), safe_serialization=True)
        self.tokenizer.save_pretrained(str(folder))

    def save_adapter(self, agent: str, folder: Path) -> None:
        """`agent`'s adapter alone as a PEFT adapter folder (adapter_config.json + adapter_model.safetensors), as vLLM
        loads it; `folder` must not exist yet."""
        if agent not in self.optimizers:
            raise KeyError(f"No adapter for agent {agent!r} (agents: {self.agents})")
        _quiet_saves()
        self.model.save_pretrained(str(folder), selected_adapters=[agent], safe_serialization=True)
        nested = folder / agent  # PEFT writes an adapter not named "default" into a folder of its name
        if (nested / "adapter_config.json").is_file():
            for item in nested.iterdir():
                os.replace(item, folder / item.name)
            shutil.rmtree(nested)

    def load_model(self, folder: Path) -> None:
        """Load the adapters `save_model` wrote (same agents and rank)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        for agent in self.agents:
            path = folder / agent / "adapter_model.safetensors"
            if not path.exists():
                raise PolicyError(f"The checkpoint {folder} has no adapter for agent {agent!r} ({path} is missing)")
            set_peft_model_state_dict(self.model, load_file(str(path)), adapter_name=agent)

    def optimizer_state(self) -> Mapping[str, Any]:
        return {"agents": {agent: optimizer.state_dict() for agent, optimizer in self.optimizers.items()}}

    def load_optimizer_state(self, state: Mapping[str, Any]) -> None:
        saved = dict(state.get("agents") or {})
        missing = sorted(set(self.agents) - set(saved))
        if missing:
            raise PolicyError(f"The checkpoint has no optimizer state for agent(s) {missing}")
        for agent, optimizer in self.optimizers.items():
            optimizer.load_state_dict(saved[agent])


class AgentView:
    """One agent's adapter as a policy (`model`, `optimizer`, `autocast`, `reference`) for `apply_update`."""

    def __init__(self, owner: AgentPolicies, agent: str) -> None:
        self.owner = owner
        self.agent = agent
        self.model = owner.model
        self.optimizer = owner.optimizers[agent]
        self.device = owner.device
        self.pad_token_id = owner.pad_token_id
        self.config = owner.config

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return self.owner.autocast()

    def claim_weights(self) -> None:
        """Nothing to hold off: an update trains the adapter only, the base the engine serves never changes."""

    @contextlib.contextmanager
    def reference(self) -> Iterator[Any]:
        """The base model (every adapter disabled)."""
        with self.model.disable_adapter():
            yield self.model


def run_agent_updates(
    policies: AgentPolicies, samples: Mapping[str, list[Any]], config: GRPOConfig, *, sampler_correction: bool = False
) -> dict[str, float]:
    """One update per agent with samples, each on its own adapter with its own optimizer; metrics as
    `"<agent>.<metric>"`, plus `"loss"`, the agents' losses summed."""
    from .update import apply_update

    metrics: dict[str, float] = {}
    for agent, agent_samples in samples.items():
        if not agent_samples:
            continue
        view = policies.view(agent)
        updated = apply_update(view, agent_samples, config, sampler_correction=sampler_correction)  # type: ignore[arg-type]
        for name, value in updated.items():
            metrics[f"{agent}.{name}"] = value
    metrics["loss"] = sum(value for key, value in metrics.items() if key.endswith(".loss"))
    return metrics
