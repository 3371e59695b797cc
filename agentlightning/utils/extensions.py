"""Extension points: how a higher layer plugs into a lower one without the lower one importing it.

A lower layer names a point and loads what fills it when it needs it; the package root (`agentlightning/__init__.py`,
above every layer it wires; see docs/architecture.md) installs each point's filler as a dotted path, imported on
first use. Every `agentlightning.*` import runs the root first, so the points are filled before any code can ask.

Points:
- `STORE_SERVER_MOUNTS`: what a store server serves beside the store API (metrics, OTLP intake, the dashboard);
  filled by the assembly package `agentlightning.server`.
- `TRACER_INSTRUMENTATION`: the module that instruments agent frameworks (`instrument_all`, `uninstrument_all`,
  `LazyInstrumentation`), which tracers turn on for their workers; filled by `agentlightning.instrumentation`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["STORE_SERVER_MOUNTS", "TRACER_INSTRUMENTATION", "install", "installed", "load"]

STORE_SERVER_MOUNTS = "store_server.mounts"
TRACER_INSTRUMENTATION = "tracer.instrumentation"

_installed: dict[str, str] = {}


def install(point: str, target: str) -> None:
    """Fill `point` with `target`: `"package.module"` (the module) or `"package.module:attribute"`."""
    if not point or not target or target.count(":") > 1:
        raise ValueError(f"install({point!r}, {target!r}): give a point name and 'module' or 'module:attribute'")
    _installed[point] = target


def installed(point: str) -> bool:
    """Whether `point` has been filled."""
    return point in _installed


def load(point: str) -> Any:
    """What fills `point`, imported now (Python caches the import). LookupError when nothing was installed."""
    target = _installed.get(point)
    if target is None:
        raise LookupError(f"nothing is installed at the extension point {point!r} (agentlightning/__init__.py does)")
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module
