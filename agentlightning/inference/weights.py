"""Reading a full set of new weights for `InferenceEngine.load_weights`: a state dict as given, a safetensors file,
or a `save_pretrained` folder (sharded or not). Only reads; checking the tensors against the model and copying them
in is the engine's (under its weight-swap rule)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

__all__ = ["WeightsError", "read_state"]


class WeightsError(ValueError):
    """New weights could not be loaded (wrong shapes, missing tensors, unreadable file)."""


def read_state(source: Union[str, Path, Mapping[str, Any]]) -> Mapping[str, Any]:
    """A state dict as given, or read from a safetensors file or a `save_pretrained` folder (sharded or not)."""
    if isinstance(source, Mapping):
        return source
    path = Path(source)
    files = [path]
    if path.is_dir():
        index = path / "model.safetensors.index.json"
        if index.exists():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise WeightsError(f"Could not read the shard index {index}: {exc}") from exc
            files = [path / name for name in sorted(set(weight_map.values()))]
        else:
            files = [path / "model.safetensors"]
    state: dict[str, Any] = {}
    for file in files:
        if not file.exists():
            raise WeightsError(f"No weights file at {file}")
        try:
            from safetensors.torch import load_file

            state.update(load_file(str(file)))
        except Exception as exc:
            raise WeightsError(f"Could not read weights from {file}: {exc}") from exc
    return state
