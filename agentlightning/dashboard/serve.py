"""Serve the dashboard for any store URL from one local server (`agl dashboard`).

- `http(s)://...`: the page plus a read-only relay to that store server (`proxy.py`).
- `memory://`, `sqlite:///...`, `postgresql://...`: the store is opened here and its `/v1/agl` API is served next
  to the page, behind a gate that refuses every write (`readonly.py`).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from .readonly import ReadOnlyGate

__all__ = ["DashboardServer", "dashboard_server_for", "is_remote_store_url"]


def is_remote_store_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in ("http", "https")


@dataclass
class DashboardServer:
    """An ASGI app and what must be closed when it stops. `keyed`: the app itself requires an API key."""

    app: Any
    store: Any = None
    keyed: bool = False

    async def serve(self, host: str, port: int, on_ready: Callable[[str], None], log_level: str = "warning") -> None:
        """Bind `host:port` (0 picks a free port), call `on_ready(url)`, then serve until interrupted.

        Raises OSError with a readable message when the address cannot be bound.
        """
        import uvicorn

        sock = _bind(host, port)
        from agentlightning.utils.hosts import guard_loopback

        app = guard_loopback(self.app, host, "key" if self.keyed else None)  # a keyless relay too: DNS rebinding
        config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on")
        server = uvicorn.Server(config)
        bound_port = sock.getsockname()[1]
        shown_host = f"[{host}]" if ":" in host else ("127.0.0.1" if host in ("0.0.0.0", "") else host)
        try:
            on_ready(f"http://{shown_host}:{bound_port}/")
            await server.serve(sockets=[sock])
        finally:
            sock.close()
            if self.store is not None:
                await self.store.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = "another process is using this port" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {reason}") from exc


def dashboard_server_for(store_url: str, *, api_key: Optional[str] = None) -> DashboardServer:
    """The server for `store_url`. `api_key` protects a locally opened store (a remote one has its own).

    Raises ValueError for a URL no backend can open.
    """
    if is_remote_store_url(store_url):
        from .proxy import create_proxy_app

        return DashboardServer(app=create_proxy_app(store_url))
    from agentlightning.store.http.server.app import ServerSettings, create_app
    from agentlightning.store.url import store_from_url

    store = store_from_url(store_url)
    app = create_app(store, ServerSettings(api_key=api_key or None, metrics=False))
    app.front_middleware.insert(0, (ReadOnlyGate, {}))
    return DashboardServer(app=app, store=store, keyed=bool(api_key))
