"""LightningStore: the control plane shared by algorithms and runners, with its backends."""

from __future__ import annotations

from .base import LightningStore, LightningStoreCapabilities, LightningStoreStatistics
from .errors import (
    AttemptNotFoundError,
    InvalidArgumentError,
    NoAttemptsError,
    RolloutNotFoundError,
    SpansEvictedError,
    StoreError,
)
from .memory import InMemoryLightningStore
from .threading import LightningStoreThreaded

__all__ = [
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreStatistics",
    "InMemoryLightningStore",
    "LightningStoreThreaded",
    "StoreError",
    "InvalidArgumentError",
    "RolloutNotFoundError",
    "AttemptNotFoundError",
    "NoAttemptsError",
    "SpansEvictedError",
]
