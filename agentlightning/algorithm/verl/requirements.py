"""`require_verl`: the check that VERL's packages are installed, shared by the Algorithm and its launch path."""

from __future__ import annotations

import importlib

__all__ = ["require_verl"]

_EXTRA_HINT = (
    "VERL training needs the optional `verl` extra: pip install 'agentlightning[verl]' (on a machine with NVIDIA "
    "GPUs; it installs verl, ray and hydra-core). For CPU-only training use agentlightning's GRPO instead."
)
_REQUIRED = ("verl", "hydra", "omegaconf", "ray", "torch")


def require_verl() -> None:
    """Raise ImportError naming the missing packages unless verl, hydra, omegaconf, ray and torch import."""
    missing: list[str] = []
    for name in _REQUIRED:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ImportError(f"{_EXTRA_HINT} Missing: {', '.join(missing)}.")
