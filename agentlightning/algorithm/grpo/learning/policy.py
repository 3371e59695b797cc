"""`Policy`: the model being trained (full fine-tune or a LoRA adapter), its optimizer and its reference.

The policy is a transformers causal LM with float32 parameters on the device `config.device` names ("auto": CUDA
when available, else the CPU; see `agentlightning.utils.device`); its optimizer state and reference model live
there too, and forward passes autocast to bfloat16 on CUDA devices that support it, or on any device with
`precision="bfloat16"` (`autocast()`).
`inference_state_dict()` gives the weights an inference engine serves (LoRA merged in, keys of the plain model), so
the served model is always a standard one. `from_engine(..., share_base=True)` trains the engine's own tensors
instead of a copy (one copy of the model in the process; see `shared_base.py`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from agentlightning.utils.device import autocast, compute_dtype, resolve_device

from ..config import GRPOConfig

if TYPE_CHECKING:
    from .shared_base import SharedBase

__all__ = ["Policy", "PolicyError"]

logger = logging.getLogger(__name__)

_LORA_PREFIX = "base_model.model."


class PolicyError(RuntimeError):
    """The policy could not be built (a missing dependency or an unreadable model); the message says why."""


def _require_peft() -> Any:
    try:
        import peft
    except ImportError as exc:
        raise PolicyError(
            "LoRA training needs peft: `pip install 'agentlightning[train]'` (or set lora_rank=None for a full "
            "fine-tune)"
        ) from exc
    return peft


class Policy:
    """A trainable causal LM with its tokenizer and AdamW optimizer.

    Args:
        model: the base model (its parameters are trained in place for a full fine-tune; frozen under LoRA).
        tokenizer: its tokenizer (used for the pad id and saved with checkpoints).
        config: the GRPO settings (learning rate, LoRA rank...).
        base_model_path: where the base model came from (recorded in LoRA checkpoints so they can be merged).
    """

    def __init__(
        self, model: Any, tokenizer: Any, config: GRPOConfig, *, base_model_path: Optional[str] = None
    ) -> None:
        import torch

        self.config = config
        self.tokenizer = tokenizer
        self.base_model_path = base_model_path
        lora = config.lora
        self.lora = lora.lora_rank is not None
        self.device = resolve_device(config.compute.device)
        self.compute_dtype = compute_dtype(self.device, config.compute.precision)
        model = model.to(device=self.device, dtype=torch.float32)
        if self.lora:
            peft = _require_peft()
            lora_config = peft.LoraConfig(
                r=lora.lora_rank,
                lora_alpha=lora.lora_alpha or 2 * (lora.lora_rank or 1),
                target_modules=lora.lora_target_modules or "all-linear",
                lora_dropout=0.0,
                task_type="CAUSAL_LM",
            )
            with warnings.catch_warnings():
                # peft reads transformers' deprecated `is_gradient_checkpointing` (a FutureWarning in every process
                # that builds a policy); the property still answers, and peft is what must change.
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
                model = peft.get_peft_model(model, lora_config)
        self.model = model
        self.model.train()
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        if not trainable:
            raise PolicyError("The policy has no trainable parameters")
        self.optimizer = torch.optim.AdamW(
            trainable,
            lr=config.effective_learning_rate,
            weight_decay=config.optimizer.weight_decay,
            betas=(0.9, 0.99),
        )
        self._reference: Optional[Any] = None
        self.shared: Optional[SharedBase] = None
        """The link to the engine that serves this policy's own tensors (None: the engine has a copy, or none)."""
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is None:
            raise PolicyError("The tokenizer has neither a pad token nor an end-of-sequence token")
        self.pad_token_id = int(pad)

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """The context of the policy's forward passes: bfloat16 autocast when `precision` asks for it (or, under
        "auto", on a CUDA device that supports it), else nothing (float32)."""
        return autocast(self.device, self.compute_dtype)

    # ------------------------------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(cls, path: Union[str, Path], config: GRPOConfig) -> Policy:
        """Load a transformers model folder (config.json, safetensors, tokenizer)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(path)
        if not (folder / "config.json").exists():
            raise PolicyError(f"{folder} is not a transformers model folder (no config.json)")
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        return cls(model, tokenizer, config, base_model_path=str(folder))

    @classmethod
    def from_engine(cls, engine: Any, config: GRPOConfig, *, share_base: bool = False) -> Policy:
        """A trainable policy on the model an `InferenceEngine` serves: a copy of it (the engine keeps its own), or,
        with `share_base` and an engine whose model is float32 on the policy's device, the engine's own tensors.

        A policy that shares them must be published through `LocalServing` (or `shared.serve`) after every update:
        an update holds the engine's generation off until then (see `shared_base.py`).
        """
        from .shared_base import SharedBase, model_on_same_tensors, why_not_shared

        reason = why_not_shared(engine, config) if share_base else "not asked for"
        if share_base and reason is not None:
            logger.info("The policy keeps its own copy of the engine's model: %s", reason)
        model = model_on_same_tensors(engine.model) if reason is None else copy.deepcopy(engine.model)
        for parameter in model.parameters():
            parameter.requires_grad_(True)
        path = getattr(getattr(engine.model, "config", None), "_name_or_path", None) or None
        policy = cls(model, engine.tokenizer, config, base_model_path=path)
        if reason is None:
            policy.shared = SharedBase(engine, policy)
        return policy

    # ----------------------------------------------------------------------------------------------- weights
    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    @property
    def lora_merged(self) -> bool:
        """Whether the LoRA delta is merged into the base weights now (False for a full fine-tune)."""
        if not self.lora:
            return False
        from peft.tuners.tuners_utils import BaseTunerLayer

        return any(module.merged for module in self.model.modules() if isinstance(module, BaseTunerLayer))

    def claim_weights(self) -> None:
        """Make the weights the policy's to train or replace: when an engine serves the policy's own tensors, its
        generation is held off (and LoRA unmerged) until the next publish; otherwise nothing to do."""
        if self.shared is not None:
            self.shared.claim()

    def inference_state_dict(self) -> dict[str, Any]:
        """Full weights with the plain model's keys (LoRA merged in), detached copies safe to hand to a server."""
        with self.merged_weights() as weights:
            return {name: tensor.clone() for name, tensor in weights.items()}

    @contextlib.contextmanager
    def merged_weights(self) -> Iterator[dict[str, Any]]:
        """The weights an inference engine serves (LoRA merged in, keys of the plain model), without copying them:
        views of the policy's own tensors, valid only inside the block (LoRA is unmerged again when it ends).

        Copying them into an engine here (`InferenceEngine.load_weights` copies in place) needs no second full copy
        of the model, which `inference_state_dict` makes. LoRA already merged (weights shared with an engine, between
        updates) stays merged.
        """
        import torch

        with torch.no_grad():
            if not self.lora:
                yield {name: tensor.detach() for name, tensor in self.model.state_dict().items()}
                return
            merge = not self.lora_merged
            if merge:
                self.model.merge_adapter()
            try:
                merged: dict[str, Any] = {}
                for name, tensor in self.model.state_dict().items():
                    if "lora_" in name:
                        continue
                    key = name[len(_LORA_PREFIX) :] if name.startswith(_LORA_PREFIX) else name
                    merged[key.replace(".base_layer.", ".")] = tensor.detach()
                yield merged
            finally:
                if merge:
                    self.model.unmerge_adapter()

    def plain_model(self) -> Any:
        """A standalone transformers model with the current weights (LoRA merged), e.g. for `save_pretrained`."""
        if not self.lora:
            return self.model
        base_copy = copy.deepcopy(self.model)
        if self.lora_merged:  # shared with an engine between updates: the copy's weights are merged already
            return base_copy.unload()
        return base_copy.merge_and_unload()

    # --------------------------------------------------------------------------------------------- reference
    @contextlib.contextmanager
    def reference(self) -> Iterator[Any]:
        """The frozen initial policy to compute KL against (LoRA: the base model with the adapter disabled)."""
        if self.lora:
            self.claim_weights()  # the adapter disabled must leave the base weights, not the served ones merged
            with self.model.disable_adapter():
                yield self.model
            return
        if self._reference is None:
            raise PolicyError("No reference model: call keep_reference() before training")
        yield self._reference

    def keep_reference(self) -> None:
        """Remember the current weights as the reference (a frozen copy for a full fine-tune; nothing for LoRA)."""
        if self.lora or self._reference is not None:
            return
        reference = copy.deepcopy(self.model).eval()
        for parameter in reference.parameters():
            parameter.requires_grad_(False)
        self._reference = reference

    # ------------------------------------------------------------------------------------------- persistence
    def save_model(self, folder: Path) -> None:
        """A standard Hugging Face folder: the full model (or the PEFT adapter) and the tokenizer."""
        _quiet_saves()
        self.model.save_pretrained(str(folder), safe_serialization=True)
        self.tokenizer.save_pretrained(str(folder))

    def save_merged(self, folder: Path) -> None:
        """The full model with LoRA merged in (what an inference server loads), plus the tokenizer.

        With LoRA the adapter is merged into the weights in place while they are written (no copy of the model)."""
        _quiet_saves()
        if not self.lora:
            self.model.save_pretrained(str(folder), safe_serialization=True)
        else:
            with self.merged_weights() as weights:
                self.model.get_base_model().save_pretrained(str(folder), state_dict=weights, safe_serialization=True)
        self.tokenizer.save_pretrained(str(folder))

    def load_model(self, folder: Path) -> None:
        """Load weights saved by `save_model` into this policy (same architecture and LoRA rank).

        Weights shared with an engine are claimed first: generation waits for the next publish."""
        from safetensors.torch import load_file

        name = "adapter_model.safetensors" if self.lora else "model.safetensors"
        path = folder / name
        if not path.exists():
            raise PolicyError(f"The checkpoint {folder} has no {name} (was it written with another LoRA setting?)")
        state = load_file(str(path))
        self.claim_weights()
        if self.lora:
            peft = _require_peft()
            peft.set_peft_model_state_dict(self.model, state)
        else:
            missing, unexpected = self.model.load_state_dict(state, strict=False)
            tied = {name for name in missing if "lm_head" in name}
            if set(missing) - tied or unexpected:
                raise PolicyError(
                    f"The checkpoint {folder} does not match the model: missing {list(missing)[:5]}, "
                    f"unexpected {list(unexpected)[:5]}"
                )

    def optimizer_state(self) -> Mapping[str, Any]:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(dict(state))


def _quiet_saves() -> None:
    """No "Writing model shards" progress bar per save (a run saves often; it would flood the live display)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
