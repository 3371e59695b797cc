"""`LightningStoreServer`: serves any LightningStore over HTTP and is itself a LightningStore.

In the process that created it, the server's store methods call the wrapped store directly. A copy of the server
object in another process (passed to a forked or spawned child) talks to the parent's server over HTTP instead,
so its writes land in the one shared store.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.store.base import LightningStore, LightningStoreCapabilities
from agentlightning.store.delegating import DelegatingStore
from agentlightning.store.forwarding import call_store
from agentlightning.store.http.client.client import API_KEY_ENV, LightningStoreClient
from agentlightning.store.http.server.handlers import ServerLimits

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from agentlightning.store.http.server.app import ServerSettings

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "LightningStoreServer", "is_loopback"]

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4747
_START_TIMEOUT = 10.0


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    from agentlightning.utils.hosts import is_loopback as loopback

    return loopback(host)


def _client_host(host: str) -> str:
    """The address clients dial: wildcard binds are reached through the loopback address."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "[::1]"
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


class LightningStoreServer(DelegatingStore):
    """Serve `store` over HTTP at `http://host:port` (routes under /v1/agl; see docs/http.md).

    Args:
        store: any LightningStore. A store that is not thread-safe is wrapped in LightningStoreThreaded, because
            the server thread and the caller use it concurrently.
        host: address to bind; 127.0.0.1 by default. A non-loopback address requires `api_key` unless
            `insecure=True`.
        port: TCP port (4747 by default; 0 picks a free one, readable from `port` after `start()`).
        cors_allow_origins: origins allowed to call the server from a browser.
        launch_mode: only "thread" (serve in a background thread of this process) is supported.
        launcher_args: a mapping with "host", "port" and "launch_mode" instead of the arguments.
        n_workers: must be 1; several worker processes are run by `agl store --workers N`.
        tracker: accepted for compatibility, unused.
        api_key: bearer token required on every route except health (default: AGL_STORE_API_KEY).
        insecure: allow binding a non-loopback address without an API key.
        max_body_bytes: largest accepted request body (413 above it).
        max_wait_seconds: longest single wait_for_rollouts request (clients poll again).
        settings: full ServerSettings (overrides api_key, cors_allow_origins, max_body_bytes, max_wait_seconds).
    """

    def __init__(
        self,
        store: LightningStore,
        host: Optional[str] = None,
        port: Optional[int] = None,
        cors_allow_origins: Optional[Sequence[str]] = None,
        launch_mode: str = "thread",
        launcher_args: Optional[Mapping[str, Any]] = None,
        n_workers: int = 1,
        tracker: Any = None,
        *,
        api_key: Optional[str] = None,
        insecure: bool = False,
        max_body_bytes: int = ServerLimits.max_body_bytes,
        max_wait_seconds: float = ServerLimits.max_wait_seconds,
        settings: Optional[ServerSettings] = None,
    ) -> None:
        if launcher_args is not None:
            if host is not None or port is not None or launch_mode != "thread":
                raise ValueError("Pass either launcher_args or host/port/launch_mode, not both")
            host = launcher_args.get("host")
            port = launcher_args.get("port")
            launch_mode = str(launcher_args.get("launch_mode", "thread"))
        capabilities = store.capabilities
        if not capabilities.get("async_safe", False):
            raise ValueError(f"{type(store).__name__} is not async-safe and cannot be served over HTTP")
        if launch_mode != "thread" or n_workers != 1:
            if not capabilities.get("zero_copy", False):
                raise ValueError("The store does not support zero-copy.")
            raise ValueError(
                "LightningStoreServer serves from a thread of this process; for several worker processes run "
                "`agl store --backend <url> --workers N`"
            )
        if not capabilities.get("thread_safe", False):
            from agentlightning.store.threading import LightningStoreThreaded

            store = LightningStoreThreaded(store)
        from agentlightning.store.http.server.app import ServerSettings

        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        if settings is None:
            settings = ServerSettings(
                api_key=key,
                limits=ServerLimits(max_body_bytes=max_body_bytes, max_wait_seconds=max_wait_seconds),
                cors_allow_origins=tuple(cors_allow_origins) if cors_allow_origins else None,
            )
        self.host = host if host is not None else DEFAULT_HOST
        self.port = int(port) if port is not None else DEFAULT_PORT
        if not is_loopback(self.host) and not settings.api_key and not insecure:
            raise ValueError(
                f"Refusing to serve the store on {self.host!r} without an API key: anyone who can reach this "
                f"address could read and change it. Set api_key (or {API_KEY_ENV}), bind 127.0.0.1, or pass "
                "insecure=True (--insecure) if the network is trusted."
            )
        if settings.allowed_hosts is None:
            from dataclasses import replace

            from agentlightning.store.http.server.app import loopback_host_names

            settings = replace(settings, allowed_hosts=loopback_host_names(self.host, settings.api_key))
        self.store: LightningStore = store
        self.settings = settings
        self._owner_pid = os.getpid()
        self._client: Optional[LightningStoreClient] = None
        self._client_lock = threading.Lock()
        self._app: Optional[FastAPI] = None
        self._uvicorn: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None
        self._thread_error: Optional[BaseException] = None

    # ------------------------------------------------------------------------------------------- lifecycle
    @property
    def endpoint(self) -> str:
        return f"http://{_client_host(self.host)}:{self.port}"

    @property
    def app(self) -> FastAPI:
        """The ASGI application (created on first use)."""
        if self._app is None:
            from agentlightning.store.http.server.app import create_app

            self._app = create_app(self.store, self.settings)
        return self._app

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return LightningStoreCapabilities(thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=True)

    @property
    def is_remote(self) -> bool:
        """In the process that serves it, the wrapped store's answer; an unpickled copy talks HTTP."""
        backend = self.store if os.getpid() == self._owner_pid and self.store is not None else None
        return True if backend is None else backend.is_remote

    def otlp_traces_endpoint(self) -> str:
        return f"{self.endpoint}/v1/traces"

    def _failure(self, reason: str) -> RuntimeError:
        return RuntimeError(f"LightningStore server failed to start on {self.endpoint}.{reason}")

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host.strip("[]") else socket.AF_INET
        try:
            sock = socket.create_server((self.host.strip("[]"), self.port), family=family, backlog=2048)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise self._failure(" Another process may already be using this port.") from exc
            raise self._failure(f" {exc.strerror or exc}.") from exc
        self.port = sock.getsockname()[1]
        return sock

    def _make_uvicorn(self) -> uvicorn.Server:
        import uvicorn

        from agentlightning.utils.untraced import untraced_asgi

        # Requests are never traced into a rollout, even when the server shares a process with an open trace context.
        config = uvicorn.Config(
            untraced_asgi(self.app),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=60,
            timeout_graceful_shutdown=5,  # long polls in flight are cut after 5 s; their clients poll again
            server_header=False,
        )
        return uvicorn.Server(config)

    def _check_owner(self, action: str) -> None:
        if os.getpid() != self._owner_pid or self.store is None:
            raise RuntimeError(f"{action}() must be called in the process that created the LightningStoreServer")

    async def start(self) -> None:
        """Serve in a background thread; returns once the server accepts connections.

        Raises RuntimeError ("... Another process may already be using this port.") when the port is taken.
        """
        self._check_owner("start")
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError(f"The LightningStore server on {self.endpoint} is already running")
        sock = self._bind()
        server = self._make_uvicorn()
        self.app.state.shutdown.reset()
        self._uvicorn, self._thread_error = server, None

        def serve() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # reported by start()
                self._thread_error = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=serve, name=f"agl-store-server-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not self._thread.is_alive() or self._thread_error is not None:
                raise self._failure(f" Reason: {self._thread_error!r}.")
            if time.monotonic() > deadline:
                server.should_exit = True
                raise self._failure(f" It did not start within {_START_TIMEOUT:.0f} seconds.")
            await asyncio.sleep(0.01)
        logger.info("LightningStore server listening on %s", self.endpoint)

    async def stop(self) -> None:
        """Stop serving (waits up to 10 s for in-flight requests). The wrapped store stays open."""
        server, thread = self._uvicorn, self._thread
        if self._app is not None:
            self._app.state.shutdown.trigger()  # long polls answer now instead of holding the shutdown
        if server is not None:
            server.should_exit = True
        if thread is not None and thread.is_alive():
            await asyncio.to_thread(thread.join, 10.0)
        self._thread = None
        if self._client is not None:
            await self._client.close()

    async def run_forever(self) -> None:
        """Serve in the current event loop until stopped (Ctrl+C or `stop()`).

        Raises RuntimeError ("... Another process may already be using this port.") when the port is taken.
        """
        self._check_owner("run_forever")
        sock = self._bind()
        server = self._make_uvicorn()
        self.app.state.shutdown.reset()
        self._uvicorn = server
        logger.info("LightningStore server listening on %s", self.endpoint)
        try:
            await server.serve(sockets=[sock])
        finally:
            sock.close()

    # ------------------------------------------------------------------------------------------ delegation
    def __getstate__(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "settings": self.settings,
            "_owner_pid": self._owner_pid,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.store = None  # type: ignore[assignment]  # an unpickled copy always delegates over HTTP
        self._client = None
        self._client_lock = threading.Lock()
        self._app = None
        self._uvicorn = None
        self._thread = None
        self._thread_error = None

    def _backend(self) -> LightningStore:
        """The wrapped store in the owner process, else a client of the owner's server."""
        if os.getpid() == self._owner_pid and self.store is not None:
            return self.store
        with self._client_lock:
            if self._client is None or getattr(self, "_client_pid", None) != os.getpid():
                self._client = LightningStoreClient(self.endpoint, api_key=self.settings.api_key)
                self._client_pid = os.getpid()
            return self._client

    async def close(self) -> None:
        await self.stop()

    async def _forward(self, operation: str, arguments: dict[str, Any]) -> Any:
        return await call_store(self._backend(), operation, arguments)
