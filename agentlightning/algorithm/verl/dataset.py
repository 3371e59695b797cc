"""Datasets for the VERL trainer: tasks stay plain dicts (the agent reads them), batched as columns.

VERL's dataloader wants a map-style dataset and a collate function; here a batch is `{"field": object array}` (the
layout of VERL's non-tensor batches), which the daemon turns back into one task dict per sample. numpy and torch
are imported when used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["LoadedDataset", "collate_samples", "read_parquet_tasks"]


class LoadedDataset:
    """A list of tasks as a map-style dataset (each item a dict; other values are wrapped as `{"input": value}`)."""

    def __init__(self, tasks: Sequence[Any]) -> None:
        self.tasks = [task if isinstance(task, dict) else {"input": task} for task in tasks]

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.tasks[index]


def collate_samples(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Samples as columns of object arrays (a field missing from a sample is None there)."""
    import numpy as np

    names: list[str] = []
    for sample in samples:
        names.extend(name for name in sample if name not in names)
    columns: dict[str, Any] = {}
    for name in names:
        column = np.empty(len(samples), dtype=object)
        column[:] = [sample.get(name) for sample in samples]
        columns[name] = column
    return columns


def read_parquet_tasks(files: Any, setting: str) -> list[dict[str, Any]]:
    """Tasks (rows as dicts) from one parquet file or a list of them."""
    import pandas as pd  # type: ignore[import-not-found]  # a verl dependency

    paths = [files] if isinstance(files, str) else list(files or [])
    if not paths:
        raise ValueError(f"No dataset was passed to VERL.run and {setting} is empty")
    frames = [pd.read_parquet(path) for path in paths]
    return [row for frame in frames for row in frame.to_dict(orient="records")]  # type: ignore[misc]
