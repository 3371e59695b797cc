"""Several LoRA adapters served at once on one base model, batched together.

Each adapter is a set of low-rank pairs `(A, B)` on some of the model's linear layers: the layer's output for a row
that uses the adapter becomes `base(x) + scale * x @ A.T @ B.T`. The base model is never modified: the adapters
live beside it and are applied by forward hooks on the linear layers, reading which slot each row of the current
forward uses (`rows(slots)`; slot 0 is the base model, adapters take slots 1, 2, ...).

Layout, built when an adapter is loaded (never per step): per adapted layer, every adapter's A stacked along the
rank, `A_all` of shape `[slots * rank, in]`, and every adapter's B side by side with its scale folded in, `B_all` of
shape `[out, slots * rank]` (ranks padded to the largest one loaded on that layer; padding is zeros). A forward then
costs, per layer:

- rows all on the base model: nothing (the hook returns at once);
- rows all on one adapter: two thin matmuls on that adapter's block, `(x @ A_s.T) @ B_s.T`;
- rows on different adapters (base rows included): `h = x @ A_all.T`, h multiplied by a 0/1 mask that keeps, per
  row, the columns of that row's slot, then `h @ B_all.T`. The mask is built once per batch composition (and
  reused while the decoding batch keeps its rows), not per layer. The work is that of the single-adapter case times
  the number of adapters loaded: no per-row gather of weight matrices, no loop over adapters.

Memory: an adapter of rank r adds `r * (in + out)` parameters per adapted layer (for SmolLM2-135M with every
attention and MLP projection adapted: 305,280 x r, i.e. 9.8 MB at rank 8 in float32); `LoraAdapters.nbytes()`
reports the total. Rank padding and the columns of an unloaded adapter's free slot count too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
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


@dataclass(eq=False)
class _LayerStack:
    """The adapters of one linear layer side by side: A `[slots * rank, in]`, B (scale folded in)
    `[out, slots * rank]`; slot s (from 1) owns rows / columns `(s - 1) * rank` up to `s * rank`."""

    layer: Any
    a: Any = None
    b: Any = None
    slots: int = 0
    rank: int = 0
    present: set[int] = field(default_factory=set)
    """The slots holding an adapter on this layer (others are zeros here)."""
    blocks: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """Per present slot, views of its own A rows and B columns (for forwards whose rows all use it)."""

    def block(self, slot: int) -> tuple[Any, Any]:
        start = (slot - 1) * self.rank
        return self.a[start : start + self.rank], self.b[:, start : start + self.rank]

    def refresh_blocks(self) -> None:
        self.blocks = {slot: self.block(slot) for slot in self.present}


class _Selection:
    """Which slot each row of the current forwards uses, and what the hooks derive from it once per batch
    composition instead of once per layer: the one slot all rows share (or None), and the row masks."""

    __slots__ = ("_masks", "_torch", "index", "present", "single")

    def __init__(self, slots: tuple[int, ...], torch: Any, device: Any) -> None:
        distinct = set(slots)
        self._torch = torch
        self.present = frozenset(distinct - {0})
        self.single: Optional[int] = slots[0] if len(distinct) == 1 else None
        self.index = None if self.single is not None else torch.tensor(slots, dtype=torch.long, device=device)
        self._masks: dict[tuple[int, int, Any, int], Any] = {}

    def mask(self, slots: int, rank: int, dtype: Any, ndim: int) -> torch.Tensor:
        """`[rows, 1, ..., slots * rank]` (`ndim` dimensions, like the hidden activations): 1 where a column belongs
        to the row's own slot, else 0."""
        key = (slots, rank, dtype, ndim)
        mask = self._masks.get(key)
        if mask is None:
            torch = self._torch
            assert self.index is not None
            owner = torch.arange(slots * rank, device=self.index.device) // rank + 1
            mask = (owner.unsqueeze(0) == self.index.unsqueeze(1)).to(dtype)
            mask = mask.view(mask.shape[0], *([1] * (ndim - 2)), mask.shape[1])
            self._masks[key] = mask
        return mask


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
        self._last: Optional[tuple[tuple[int, ...], _Selection]] = None  # the decoding batch keeps its rows

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
        """Bytes the loaded adapters' stacks hold (rank padding and free slots included)."""
        total = 0
        for stack in self._stacks.values():
            for tensor in (stack.a, stack.b):
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
            r = int(a.shape[0]) if len(a.shape) == 2 else 0
            if r < 1 or tuple(a.shape) != (r, layer.in_features) or tuple(b.shape) != (layer.out_features, r):
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
            return
        for stack in self._stacks.values():  # trailing free slots would only widen every mixed forward
            used = max(stack.present, default=0)
            if used < stack.slots:
                self._resize(stack, used, stack.rank)

    def _free_slot(self) -> int:
        used = {adapter.slot for adapter in self._adapters.values()}
        slot = 1
        while slot in used:
            slot += 1
        return slot

    def _clear_slot(self, adapter: _Adapter) -> None:
        for layer_name in adapter.layers:
            stack = self._stacks.get(layer_name)
            if stack is None or adapter.slot not in stack.present:
                continue
            a, b = stack.block(adapter.slot)
            a.zero_()
            b.zero_()
            stack.present.discard(adapter.slot)
            stack.blocks.pop(adapter.slot, None)

    def _resize(self, stack: _LayerStack, slots: int, rank: int) -> None:
        """Give `stack` room for `slots` slots of `rank` columns each, keeping what the old layout held."""
        layer = stack.layer
        a = layer.weight.new_zeros((slots * rank, layer.in_features))
        b = layer.weight.new_zeros((layer.out_features, slots * rank))
        if stack.a is not None and stack.b is not None and stack.slots and stack.rank:
            keep_slots, keep_rank = min(slots, stack.slots), min(rank, stack.rank)
            old_a = stack.a.view(stack.slots, stack.rank, layer.in_features)
            old_b = stack.b.view(layer.out_features, stack.slots, stack.rank)
            a.view(slots, rank, layer.in_features)[:keep_slots, :keep_rank] = old_a[:keep_slots, :keep_rank]
            b.view(layer.out_features, slots, rank)[:, :keep_slots, :keep_rank] = old_b[:, :keep_slots, :keep_rank]
        stack.a, stack.b, stack.slots, stack.rank = a, b, slots, rank
        stack.refresh_blocks()

    def _write(self, layer_name: str, slot: int, a: Any, b: Any, scale: float) -> None:
        stack = self._stacks.get(layer_name)
        if stack is None:
            stack = self._stacks[layer_name] = _LayerStack(self._linear[layer_name])
        rank = int(a.shape[0])
        if slot > stack.slots or rank > stack.rank:
            self._resize(stack, max(slot, stack.slots), max(rank, stack.rank))
        weight = stack.layer.weight
        block_a, block_b = stack.block(slot)
        with self._torch.no_grad():
            block_a.zero_()
            block_b.zero_()
            block_a[:rank] = a.detach().to(device=weight.device, dtype=weight.dtype)
            block_b[:, :rank] = b.detach().to(device=weight.device, dtype=weight.dtype) * float(scale)
        stack.present.add(slot)
        stack.blocks[slot] = (block_a, block_b)

    # ---------------------------------------------------------------------------------------------- forwards
    @contextmanager
    def rows(self, slots: Optional[list[int]]) -> Iterator[None]:
        """Forwards run inside the block apply adapter `slots[i]` to row i (None or all zeros: the base model)."""
        previous = getattr(self._local, "selection", None)
        self._local.selection = self._selection(slots)
        try:
            yield
        finally:
            self._local.selection = previous

    def _selection(self, slots: Optional[list[int]]) -> Optional[_Selection]:
        if not slots or not self._adapters or not any(slots):
            return None
        key = tuple(slots)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        device = next(iter(self._stacks.values())).a.device
        selection = _Selection(key, self._torch, device)
        self._last = (key, selection)
        return selection

    def _ensure_hooks(self) -> None:
        for layer_name, stack in self._stacks.items():
            if layer_name not in self._hooks:
                self._hooks[layer_name] = stack.layer.register_forward_hook(self._hook(stack))

    def _hook(self, stack: _LayerStack) -> Any:
        linear = self._torch.nn.functional.linear
        local = self._local

        def apply(_module: Any, inputs: tuple[Any, ...], output: Any) -> Any:
            selection: Optional[_Selection] = getattr(local, "selection", None)
            if selection is None:
                return output
            x = inputs[0]
            single = selection.single
            if single is not None:
                block = stack.blocks.get(single)
                if block is None:
                    return output
                return output + linear(linear(x, block[0]), block[1])
            if selection.present.isdisjoint(stack.present):
                return output
            hidden = linear(x, stack.a)
            hidden.mul_(selection.mask(stack.slots, stack.rank, hidden.dtype, hidden.dim()))
            return output + linear(hidden, stack.b)

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
