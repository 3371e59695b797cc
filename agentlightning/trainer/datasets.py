"""Checks of the datasets given to `Trainer.fit`: any sequence, or any object with `__getitem__` and `__len__`
(a `datasets.Dataset` works), whose items can travel to runner processes."""

from __future__ import annotations

from typing import Any

__all__ = ["check_dataset", "check_items_serialisable"]

_CHECK_ALL_UP_TO = 10_000
_CHECK_FIRST = 1_000


def check_dataset(name: str, dataset: Any) -> None:
    """TypeError naming `name` unless `dataset` is None or indexable with a length."""
    if dataset is None:
        return
    if isinstance(dataset, (str, bytes, dict)) or not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
        raise TypeError(
            f"{name} must be a sequence of tasks (a list, or an object with __getitem__ and __len__ such as a "
            f"datasets.Dataset), got {type(dataset).__name__}"
        )
    try:
        len(dataset)
    except Exception as exc:
        raise TypeError(f"{name}: len() failed on the {type(dataset).__name__}: {exc}") from exc


def check_items_serialisable(name: str, dataset: Any) -> None:
    """TypeError naming the first item that cannot be sent to the store as JSON (all items of datasets up to
    10,000 items, the first 1,000 of larger ones)."""
    if dataset is None:
        return
    from pydantic_core import PydanticSerializationError, to_json

    size = len(dataset)
    count = size if size <= _CHECK_ALL_UP_TO else _CHECK_FIRST
    for index in range(count):
        try:
            item = dataset[index]
        except Exception as exc:
            raise TypeError(f"{name}[{index}] cannot be read: {type(exc).__name__}: {exc}") from exc
        try:
            to_json(item)
        except (PydanticSerializationError, ValueError, TypeError) as exc:
            raise TypeError(
                f"{name}[{index}] cannot be sent to the store: {exc}. Tasks must be JSON-serialisable (dicts, "
                "lists, strings, numbers, pydantic models) when runners are separate processes."
            ) from exc
