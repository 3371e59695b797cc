"""The running batch's key/value cache and attention mask: rows joining, rows leaving, left padding.

Pure tensor bookkeeping for `batching.BatchScheduler`, which owns the rows and calls these between decoding steps:
every row of the batch is left-padded to the longest one (mask 0 over the padding), prefilled rows join by padding
whichever side is shorter, and leaving rows take the padding columns no remaining row needs with them. No model
calls and no threads here; the cache is a transformers `DynamicCache` (its `layers`, each with `keys` and
`values` of shape `[rows, heads, columns, dim]`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["append_rows", "keep_rows", "output_cache", "pad_left", "pad_left_kv", "select_rows"]


def output_cache(output: Any) -> Any:
    """The key/value cache a forward returned: `cache` in newer transformers (reading the old `past_key_values`
    name logs a deprecation warning there), `past_key_values` before."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def pad_left(mask: torch.Tensor, columns: int) -> torch.Tensor:
    """`mask` with `columns` zero columns in front."""
    import torch

    return torch.cat([torch.zeros((mask.shape[0], columns), dtype=mask.dtype, device=mask.device), mask], dim=1)


def pad_left_kv(tensor: torch.Tensor, columns: int) -> torch.Tensor:
    """Keys or values `[rows, heads, length, dim]` with `columns` zero positions in front."""
    import torch

    batch, heads, _, dim = tensor.shape
    return torch.cat([tensor.new_zeros((batch, heads, columns, dim)), tensor], dim=2)


def select_rows(cache: Any, mask: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Keep rows `index` (repeats allowed) of `cache`, in place, and return the mask of those rows."""
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, index)
        layer.values = layer.values.index_select(0, index)
    return mask.index_select(0, index)


def append_rows(cache: Any, mask: torch.Tensor, new_cache: Any, new_mask: torch.Tensor) -> torch.Tensor:
    """Append the rows of `new_cache` to `cache` (in place), padding the shorter side on the left; returns the mask
    of all the rows."""
    import torch

    length, width = int(new_mask.shape[1]), int(mask.shape[1])
    if length < width:
        new_mask = pad_left(new_mask, width - length)
    elif length > width:
        mask = pad_left(mask, length - width)
    for old, new in zip(cache.layers, new_cache.layers, strict=True):
        new_keys, new_values = new.keys, new.values
        if length < width:
            new_keys = pad_left_kv(new_keys, width - length)
            new_values = pad_left_kv(new_values, width - length)
        elif length > width:
            old.keys = pad_left_kv(old.keys, length - width)
            old.values = pad_left_kv(old.values, length - width)
        old.keys = torch.cat([old.keys, new_keys], dim=0)
        old.values = torch.cat([old.values, new_values], dim=0)
    return torch.cat([mask, new_mask], dim=0)


def keep_rows(cache: Any, mask: torch.Tensor, keep: list[int]) -> torch.Tensor:
    """Keep rows `keep` of `cache` (in place), dropping the leading columns that are padding in every kept row;
    returns their mask."""
    import torch

    index = torch.tensor(keep, dtype=torch.long, device=mask.device)
    mask = mask.index_select(0, index)
    start = int(torch.nonzero(mask.any(dim=0))[0])
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, index)[:, :, start:, :].contiguous()
        layer.values = layer.values.index_select(0, index)[:, :, start:, :].contiguous()
    return mask[:, start:]
