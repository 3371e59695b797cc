"""An `agl store` process for fault tests: started on a fixed port, stopped (SIGTERM) or killed, started again."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StoreServerProcess:
    """`agl store --backend sqlite:///<path>` (or `--backend <backend>`) on one port, for as many starts as a test
    needs."""

    def __init__(self, database: Optional[Path] = None, *, port: Optional[int] = None, backend: str = "") -> None:
        if not backend and database is None:
            raise ValueError("give the SQLite file or the backend URL")
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [
            sys.executable,
            "-m",
            "agentlightning",
            "store",
            "--backend",
            backend or f"sqlite:///{database}",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        self.process: Optional[subprocess.Popen[bytes]] = None

    def start(self, timeout: float = 30.0, *, env: Optional[dict[str, str]] = None) -> None:
        """Start the server (with `env` added to this process's environment) and return once it accepts
        connections."""
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"agl store exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("agl store did not accept connections in time")

    def stop(self) -> None:
        """A clean stop (SIGTERM), as a restart by a supervisor does."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(30)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> StoreServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
