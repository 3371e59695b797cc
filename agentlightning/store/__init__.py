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
from .url import store_from_url

__all__ = [
    "AttemptNotFoundError",
    "InMemoryLightningStore",
    "InvalidArgumentError",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreStatistics",
    "LightningStoreThreaded",
    "NoAttemptsError",
    "RolloutNotFoundError",
    "SpansEvictedError",
    "StoreError",
    "store_from_url",
]
