"""The store server side of HTTP: `LightningStoreServer`, the ASGI app, routing, handlers, middleware, bodies,
idempotency, claims recovery, metrics and OTLP ingest.

The public names are imported on first use (the heavy dependencies stay unloaded until then)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentlightning.store.http.server.server import (
        DEFAULT_HOST,
        DEFAULT_PORT,
        LightningStoreServer,
        is_loopback,
    )

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LightningStoreServer",
    "is_loopback",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module("agentlightning.store.http.server.server"), name)
