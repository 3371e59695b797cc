"""Serve an ASGI app with uvicorn on a background thread (its own event loop), with a clean start and stop.

The serving thread runs detached from trace contexts, so a server sharing a process with a rollout's open trace
(the LLM proxy, the local inference server) never has its spans attributed to that rollout.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Optional

logger = logging.getLogger(__name__)


class ServerStartError(RuntimeError):
    """The server did not come up (port in use, bad host, ...)."""


class UvicornThread:
    """Runs `app` on `host:port` in a daemon thread. `port=0` picks a free port (see `.port` after `start()`)."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, name: str = "agl-server") -> None:
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self._server: Any = None
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and bool(getattr(self._server, "started", False))

    def start(self, timeout: float = 20.0) -> None:
        import uvicorn

        if self.running:
            return
        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._error = None

        def serve() -> None:
            from agentlightning.utils.untraced import detached_from_traces

            try:
                # The server's tasks inherit this context: nothing it does is traced into a rollout of this process.
                with detached_from_traces():
                    asyncio.run(self._server.serve())
            except BaseException as exc:  # SystemExit is how uvicorn reports a failed bind
                self._error = exc

        self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not getattr(self._server, "started", False):
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._server.should_exit = True
                reason = f": {self._error!r}" if self._error and not isinstance(self._error, SystemExit) else ""
                raise ServerStartError(
                    f"{self.name} failed to start on {self.host}:{self.port}"
                    f"{reason or ' (is another process using this port?)'}"
                )
            time.sleep(0.01)
        sockets = [sock for server in self._server.servers for sock in server.sockets]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.error("%s did not stop within %.0f s", self.name, timeout)
        self._thread = None
        self._server = None
