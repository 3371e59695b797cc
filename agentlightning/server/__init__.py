"""The store server process, assembled: the store API (`agentlightning.store.http.server`) with metrics, OTLP trace
intake and the web dashboard (`agentlightning.dashboard`) mounted on it (`mounts.py`).

This package sits above the store, the tracer and the dashboard, so that none of them imports a layer above it
(docs/architecture.md). Store servers get these mounts without naming this package: the package root installs
`STORE_SERVER_MOUNTS` at the store server's extension point (`agentlightning.utils.extensions`), so
`LightningStoreServer(store)` (from `agentlightning.store`), `create_app(store)`, `agl store` and `agl dashboard`
all serve them; `ServerSettings(mounts=())` serves the store API and /health alone.
"""

from __future__ import annotations

from agentlightning.server.mounts import STORE_SERVER_MOUNTS, mount_dashboard, mount_metrics, mount_otlp

__all__ = ["STORE_SERVER_MOUNTS", "mount_dashboard", "mount_metrics", "mount_otlp"]
