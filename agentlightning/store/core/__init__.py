"""The store written once over a storage interface: rollouts, attempts, resources, lifecycle rules, change sets,
queries, validation and notifications."""

from agentlightning.store.core.store import (
    CoreLightningStore,
    CoreStoreBase,
)

__all__ = [
    "CoreLightningStore",
    "CoreStoreBase",
]
