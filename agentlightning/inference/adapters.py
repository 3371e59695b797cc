"""Several LoRA adapters served at once on one base model, batched together.

Each adapter is a set of low-rank pairs `(A, B)` on some of the model's linear layers: the layer's output for a row
that uses the adapter becomes `base(x) + scale * x @ A.T @ B.T`. The base model is never modified: the adapters
live beside it (stacked per layer, slot 0 being "no adapter": zeros) and are applied by forward hooks on the linear
layers, reading which slot each row of the current forward uses (`rows(slots)`). Rows of different adapters (and
base rows) therefore share one batched forward; a forward whose rows all use one adapter takes a plain matmul
instead of the gathered one.

Memory: an adapter of rank r adds `r * (in + out)` parameters per adapted layer (for SmolLM2-135M with every
attention and MLP projection adapted: 305,280 x r, i.e. 9.8 MB at rank 8 in float32); `LoraAdapters.nbytes()`
reports the total, which includes slot 0 (zeros, as large as one adapter). Stacks are padded to the largest rank
loaded (zeros contribute nothing).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:
    import torch

__all__ = ["AdapterError", "AdapterWeights", "LoraAdapters", "read_peft_adapter"]

AdapterWeights = Mapping[str, tuple[Any, Any]]
"""Per adapted layer (its name in the base model, e.g. `model.layers.0.self_attn.q_proj`): `(A, B)` with A of shape
`(rank, in_features)` and B of shape `(out_features, rank)`."""

_PEFT_PREFIX = "base_model.model."


class AdapterError(ValueError):
    """An adapter could not be loaded (unknown layer, wrong shape, unreadable file); the message says which."""


@dataclass
class _Adapter:
    slot: int
    version: str
    rank: int
    scale: float
    layers: frozenset[str]


class _LayerStack:
    """The stacked adapters of one linear layer: A `[slots, rank, in]`, B `[slots, out, rank]`, scale `[slots]`."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.a: Optional[torch.Tensor] = None
        self.b: Optional[torch.Tensor] = None
        self.scale: Optional[torch.Tensor] = None


class LoraAdapters:
    """The adapters an engine serves (see the module docstring); loads and swaps happen while no row runs."""

    def __init__(self, model: Any) -> None:
        import torch

        self._torch = torch
        self.model = model
        self._linear = {name: module for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
        self._stacks: dict[str, _LayerStack] = {}
        self._adapters: dict[str, _Adapter] = {}
        self._hooks: dict[str, Any] = {}
        self._local = threading.local()

    # ------------------------------------------------------------------------------------------------ queries
    @property
    def names(self) -> list[str]:
        return list(self._adapters)

    def __contains__(self, name: object) -> bool:
        return name in self._adapters

    def version(self, name: str) -> str:
        return self._adapters[name].version

    def slot(self, name: Optional[str]) -> int:
        """The slot of adapter `name` (0: the base model); KeyError for an adapter not loaded."""
        if name is None:
            return 0
        adapter = self._adapters.get(name)
        if adapter is None:
            raise KeyError(f"No LoRA adapter {name!r} is loaded (loaded: {self.names})")
        return adapter.slot

    def nbytes(self) -> int:
        """Bytes the loaded adapters' stacks hold (slot 0 and rank padding included)."""
        total = 0
        for stack in self._stacks.values():
            for tensor in (stack.a, stack.b, stack.scale):
                if tensor is not None:
                    total += tensor.numel() * tensor.element_size()
        return total

    # ------------------------------------------------------------------------------------------ load / unload
    def load(self, name: str, weights: AdapterWeights, *, scale: float, version: str) -> None:
        """Add adapter `name`, or replace its weights in place (its slot is kept). Checked before anything changes."""
        if not weights:
            raise AdapterError(f"Adapter {name!r} has no layers")
        rank = 0
        checked: dict[str, tuple[Any, Any]] = {}
        for layer_name, (a, b) in weights.items():
            layer = self._linear.get(layer_name)
            if layer is None:
                known = list(self._linear)[:3]
                raise AdapterError(
                    f"Adapter {name!r} adapts {layer_name!r}, which is not a linear layer of the model (e.g. {known})"
                )
            r = int(a.shape[0])
            if tuple(a.shape) != (r, layer.in_features) or tuple(b.shape) != (layer.out_features, r):
                raise AdapterError(
                    f"Adapter {name!r}, layer {layer_name}: A {tuple(a.shape)} and B {tuple(b.shape)} do not fit a "
                    f"linear layer {layer.in_features} -> {layer.out_features} (expected A (r, {layer.in_features}), "
                    f"B ({layer.out_features}, r))"
                )
            rank = max(rank, r)
            checked[layer_name] = (a, b)
        existing = self._adapters.get(name)
        slot = existing.slot if existing is not None else self._free_slot()
        if existing is not None:
            self._clear_slot(existing)
        for layer_name, (a, b) in checked.items():
            self._write(layer_name, slot, a, b, scale)
        self._adapters[name] = _Adapter(slot, version, rank, float(scale), frozenset(checked))
        self._ensure_hooks()

    def unload(self, name: str) -> None:
        """Remove adapter `name` (its slot is zeroed and reused by the next load)."""
        adapter = self._adapters.pop(name, None)
        if adapter is None:
            raise KeyError(f"No LoRA adapter {name!r} is loaded (loaded: {self.names})")
        self._clear_slot(adapter)
        if not self._adapters:
            self._stacks.clear()
            for hook in self._hooks.values():
                hook.remove()
            self._hooks.clear()

    def _free_slot(self) -> int:
        used = {adapter.slot for adapter in self._adapters.values()}
        slot = 1
        while slot in used:
            slot += 1
        return slot

    def _clear_slot(self, adapter: _Adapter) -> None:
        for layer_name in adapter.layers:
            stack = self._stacks.get(layer_name)
            if stack is None or stack.a is None or stack.b is None or stack.scale is None:
                continue
            if adapter.slot < stack.a.shape[0]:
                stack.a[adapter.slot].zero_()
                stack.b[adapter.slot].zero_()
                stack.scale[adapter.slot] = 0.0

    def _write(self, layer_name: str, slot: int, a: Any, b: Any, scale: float) -> None:
        torch = self._torch
        layer = self._linear[layer_name]
        weight = layer.weight
        stack = self._stacks.get(layer_name)
        if stack is None:
            stack = self._stacks[layer_name] = _LayerStack(layer)
        rank = int(a.shape[0])
        slots = max(slot + 1, stack.a.shape[0] if stack.a is not None else 0)
        width = max(rank, stack.a.shape[1] if stack.a is not None else 0)
        if stack.a is None or stack.b is None or stack.scale is None or tuple(stack.a.shape[:2]) != (slots, width):
            grown_a = weight.new_zeros((slots, width, layer.in_features))
            grown_b = weight.new_zeros((slots, layer.out_features, width))
            grown_scale = weight.new_zeros((slots,))
            if stack.a is not None and stack.b is not None and stack.scale is not None:
                old_slots, old_width = stack.a.shape[0], stack.a.shape[1]
                grown_a[:old_slots, :old_width] = stack.a
                grown_b[:old_slots, :, :old_width] = stack.b
                grown_scale[:old_slots] = stack.scale
            stack.a, stack.b, stack.scale = grown_a, grown_b, grown_scale
        with torch.no_grad():
            stack.a[slot].zero_()
            stack.b[slot].zero_()
            stack.a[slot, :rank] = a.detach().to(device=weight.device, dtype=weight.dtype)
            stack.b[slot, :, :rank] = b.detach().to(device=weight.device, dtype=weight.dtype)
            stack.scale[slot] = float(scale)

    # ---------------------------------------------------------------------------------------------- forwards
    @contextmanager
    def rows(self, slots: Optional[list[int]]) -> Iterator[None]:
        """Forwards run inside the block apply adapter `slots[i]` to row i (None or all zeros: the base model)."""
        previous = getattr(self._local, "slots", None)
        self._local.slots = self._slot_tensor(slots)
        try:
            yield
        finally:
            self._local.slots = previous

    def _slot_tensor(self, slots: Optional[list[int]]) -> Union[int, torch.Tensor, None]:
        if not slots or not self._adapters or not any(slots):
            return None
        if all(slot == slots[0] for slot in slots):
            return slots[0]  # one adapter for every row: a plain matmul
        device = next(iter(self._linear.values())).weight.device
        return self._torch.tensor(slots, dtype=self._torch.long, device=device)

    def _ensure_hooks(self) -> None:
        for layer_name, stack in self._stacks.items():
            if layer_name not in self._hooks:
                self._hooks[layer_name] = stack.layer.register_forward_hook(self._hook(stack))

    def _hook(self, stack: _LayerStack) -> Any:
        torch = self._torch

        def apply(_module: Any, inputs: tuple[Any, ...], output: Any) -> Any:
            slots = getattr(self._local, "slots", None)
            if slots is None or stack.a is None or stack.b is None or stack.scale is None:
                return output
            x = inputs[0]
            if isinstance(slots, int):
                if slots >= stack.a.shape[0]:
                    return output
                delta = (x @ stack.a[slots].T) @ stack.b[slots].T
                return output + stack.scale[slots] * delta
            index = slots.clamp(max=stack.a.shape[0] - 1)
            valid = (slots < stack.a.shape[0]).to(x.dtype)
            a = stack.a.index_select(0, index)  # [rows, rank, in]
            b = stack.b.index_select(0, index)  # [rows, out, rank]
            scale = stack.scale.index_select(0, index) * valid
            flat = x.reshape(x.shape[0], -1, x.shape[-1])
            delta = torch.bmm(torch.bmm(flat, a.transpose(1, 2)), b.transpose(1, 2))
            return output + (scale.view(-1, 1, 1) * delta).reshape(output.shape)

        return apply


def read_peft_adapter(folder: Union[str, Path]) -> tuple[dict[str, tuple[Any, Any]], float]:
    """The layers and scale of a PEFT LoRA adapter folder (`adapter_config.json`, `adapter_model.safetensors`)."""
    from safetensors.torch import load_file

    path = Path(folder)
    config_file, weights_file = path / "adapter_config.json", path / "adapter_model.safetensors"
    if not config_file.is_file() or not weights_file.is_file():
        raise AdapterError(f"{path} is not a PEFT LoRA adapter folder (needs adapter_config.json and "
                           "adapter_model.safetensors)")  # fmt: skip
    try:
        config = json.loads(config_file.read_text())
        state = load_file(str(weights_file))
    except Exception as exc:
        raise AdapterError(f"Could not read the adapter in {path}: {exc}") from exc
    rank = int(config.get("r") or 0)
    alpha = float(config.get("lora_alpha") or rank)
    if rank < 1:
        raise AdapterError(f"{config_file} has no positive rank 'r'")
    scale = alpha / (rank**0.5) if config.get("use_rslora") else alpha / rank
    pairs: dict[str, dict[str, Any]] = {}
    for key, tensor in state.items():
        for part in ("lora_A", "lora_B"):
            marker = f".{part}."
            if marker in key:
                layer = key.split(marker)[0]
                layer = layer[len(_PEFT_PREFIX) :] if layer.startswith(_PEFT_PREFIX) else layer
                pairs.setdefault(layer, {})[part] = tensor
    weights = {layer: (parts["lora_A"], parts["lora_B"]) for layer, parts in pairs.items() if len(parts) == 2}
    if not weights:
        raise AdapterError(f"{weights_file} holds no lora_A / lora_B pairs")
    return weights, scale
