"""The store client side of HTTP: `LightningStoreClient`, its transport, sessions, retry policy and keep-alive HTTP/1.1
client.

The public names are imported on first use (the heavy dependencies stay unloaded until then)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentlightning.store.http.client.client import (
        API_KEY_ENV,
        LightningStoreClient,
    )

__all__ = [
    "API_KEY_ENV",
    "LightningStoreClient",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module("agentlightning.store.http.client.client"), name)
