"""The entropy of the policy's sampling distribution over the trained tokens, measured on the logits the update's
forward pass computes anyway (no extra forward; detached; chunked so the softmax never spans the whole batch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["CHUNK_ELEMENTS", "EntropySum"]

CHUNK_ELEMENTS = 1 << 24
"""Logits (tokens x vocabulary) one entropy chunk processes: about 64 MiB in float32."""


class EntropySum:
    """Running total of the per-token entropy (nats) over the tokens added; `mean` is None before any."""

    def __init__(self) -> None:
        self.total = 0.0
        self.tokens = 0

    def add(self, logits: torch.Tensor, mask: torch.Tensor) -> None:
        """Add the entropy of `softmax(logits[i, t])` at every position where `mask[i, t] > 0`; `logits` is
        (rows, positions, vocabulary) as sampled (already divided by the temperature), `mask` (rows, positions)."""
        import torch

        if logits.shape[:2] != mask.shape:
            raise ValueError(f"entropy mask of shape {tuple(mask.shape)} for logits of shape {tuple(logits.shape)}")
        with torch.no_grad():
            positions = (mask > 0).nonzero(as_tuple=False)
            chunk = max(1, CHUNK_ELEMENTS // max(int(logits.shape[-1]), 1))
            for start in range(0, positions.shape[0], chunk):
                rows, columns = positions[start : start + chunk].unbind(-1)
                log_p = torch.log_softmax(logits[rows, columns].detach().float(), dim=-1)
                probabilities = log_p.exp()
                self.total += float(-torch.where(probabilities > 0, probabilities * log_p, 0.0).sum())
            self.tokens += int(positions.shape[0])

    @property
    def mean(self) -> float | None:
        return self.total / self.tokens if self.tokens else None
