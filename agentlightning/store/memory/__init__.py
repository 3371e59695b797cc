"""`InMemoryLightningStore` and its process-local storage."""

from agentlightning.store.memory.store import (
    InMemoryLightningStore,
    estimate_model_size,
    estimate_span_size,
)

__all__ = [
    "InMemoryLightningStore",
    "estimate_model_size",
    "estimate_span_size",
]
