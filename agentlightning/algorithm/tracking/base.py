"""The tracker interface and the pure helpers every tracker shares.

A tracker receives what an algorithm records as it goes: its settings once (`log_params`), numeric metrics per step
(`log_metrics`, nested records flattened to `a/b` names), and short texts (`log_text`: a run's warnings and verdict).
Each experiment-tracking library gets one small class in this package; `make_tracker` builds them from the
algorithms' single `tracking=` option. Nothing here imports a tracking library.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MultiTracker", "Tracker", "flatten_metrics", "flatten_params"]

logger = logging.getLogger(__name__)


class Tracker(ABC):
    """Where an algorithm's records go besides its own files (TensorBoard, MLflow, Weights & Biases, ...)."""

    name: str = "tracker"

    @abstractmethod
    def log_params(self, params: Mapping[str, Any]) -> None:
        """Record the run's settings (flat names; values are numbers, strings, booleans or None)."""

    @abstractmethod
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Record finite numeric metrics at `step` (flat names such as `reward_mean` or `seconds/update`)."""

    @abstractmethod
    def log_text(self, name: str, text: str, step: int) -> None:
        """Record a short text at `step` (a warning, a verdict)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and finish the run; idempotent."""


class MultiTracker(Tracker):
    """Several trackers as one. A tracker that fails is logged once and dropped: tracking never stops training."""

    name = "multi"

    def __init__(self, trackers: Sequence[Tracker]) -> None:
        self.trackers = list(trackers)

    def _each(self, method: str, *args: Any) -> None:
        for tracker in list(self.trackers):
            try:
                getattr(tracker, method)(*args)
            except Exception as exc:
                logger.warning(
                    "Experiment tracking to %s failed (%r); it is turned off for this run", tracker.name, exc
                )
                self.trackers.remove(tracker)
                try:
                    tracker.close()
                except Exception:
                    pass

    def log_params(self, params: Mapping[str, Any]) -> None:
        self._each("log_params", params)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self._each("log_metrics", metrics, step)

    def log_text(self, name: str, text: str, step: int) -> None:
        self._each("log_text", name, text, step)

    def close(self) -> None:
        self._each("close")


def flatten_metrics(record: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of a (nested) record as `{"a/b": value}`; booleans count as 0/1; strings, None, lists and
    non-finite numbers are left out (a tracker plots numbers)."""
    result: dict[str, float] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            result.update(flatten_metrics(value, f"{name}/"))
        elif isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
            result[name] = float(value)
    return result


def flatten_params(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A (nested) settings record as flat `{"a.b": value}` with scalar values; other values become their text."""
    result: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            result.update(flatten_params(value, f"{name}."))
        elif value is None or isinstance(value, (bool, int, float, str)):
            result[name] = value
        else:
            result[name] = repr(value) if callable(value) else str(value)
    return result
