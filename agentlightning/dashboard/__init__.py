"""The web dashboard: watch a training run in the browser (rollouts, traces, rewards, resources, runners).

The dashboard is a static page of plain HTML, ES modules and CSS in `static/` (no build step, no Node.js, nothing
fetched from a CDN). It reads the store only through the public `/v1/agl` REST API, so it works for every backend.
It is served at `/` by every store server (`agl store`), and by `agl dashboard --store URL` for any store URL.
See docs/dashboard.md.
"""

from __future__ import annotations

from .assets import STATIC_DIR, load_assets
from .routes import mount_dashboard

__all__ = ["STATIC_DIR", "load_assets", "mount_dashboard"]
