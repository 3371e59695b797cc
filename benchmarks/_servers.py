"""Server processes for the benchmarks: a free loopback port, and starting a server and waiting until it is ready."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any, Optional


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def start_server(
    command_for_port: Callable[[int], list[str]],
    *,
    name: str,
    timeout: float,
    ready: Callable[[int], bool] = accepts_connections,
    poll_interval: float = 0.05,
    env: Optional[dict[str, str]] = None,
    **popen_options: Any,
) -> tuple[subprocess.Popen[bytes], int]:
    """Start `command_for_port(port)` on a free port and wait until `ready(port)`.

    Raises:
        RuntimeError: the process exited first, or was not ready within `timeout` seconds (it is then killed).
    """
    port = free_port()
    process: subprocess.Popen[bytes] = subprocess.Popen(command_for_port(port), env=env, **popen_options)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with code {process.returncode}")
        if ready(port):
            return process, port
        time.sleep(poll_interval)
    process.kill()
    raise RuntimeError(f"{name} was not ready within {timeout:.0f} s")
