"""`FastAlgorithm`: the marker base of algorithms cheap enough for `Trainer.dev` (quick developer loops)."""

from __future__ import annotations

from .base import Algorithm

__all__ = ["FastAlgorithm"]


class FastAlgorithm(Algorithm):
    """An algorithm that finishes quickly and needs no training hardware; `Trainer.dev` accepts only these."""
