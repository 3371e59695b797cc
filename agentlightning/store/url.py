"""Open a store from a URL: `memory://`, `sqlite:///path.db`, `postgresql://user@host/db`, `http://host:port`.

Each scheme maps to a backend module exposing `store_from_url(url: str) -> LightningStore`; the module is imported
only when its scheme is used, so optional drivers are needed only by those who use them.
"""

from __future__ import annotations

from importlib import import_module
from urllib.parse import urlsplit

from agentlightning.store.base import LightningStore
from agentlightning.store.errors import InvalidArgumentError

__all__ = ["SCHEME_MODULES", "store_from_url"]

SCHEME_MODULES: dict[str, str] = {
    "memory": "agentlightning.store.memory.store",
    "sqlite": "agentlightning.store.sqlite.store",
    "postgresql": "agentlightning.store.postgres.store",
    "postgres": "agentlightning.store.postgres.store",
    "http": "agentlightning.store.client_server",
    "https": "agentlightning.store.client_server",
}


def store_from_url(url: str) -> LightningStore:
    """Create the store a URL names. Raises InvalidArgumentError for an unknown scheme or a malformed URL."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidArgumentError(
            f"Invalid store URL {url!r}: expected one of memory://, sqlite:///path, postgresql://..., http://host:port"
        )
    scheme = urlsplit(url).scheme.lower()
    module_name = SCHEME_MODULES.get(scheme)
    if module_name is None:
        raise InvalidArgumentError(
            f"Unknown store URL scheme {scheme!r} in {url!r}; supported: {', '.join(sorted(SCHEME_MODULES))}"
        )
    try:
        module = import_module(module_name)
    except ImportError as exc:
        raise InvalidArgumentError(f"The {scheme!r} store backend is not available: {exc}") from exc
    factory = getattr(module, "store_from_url", None)
    if factory is None:
        raise InvalidArgumentError(f"The {scheme!r} store backend is not available in this version")
    return factory(url)
