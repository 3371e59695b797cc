"""A PostgreSQL server that a test starts, stops and restarts itself (for outages), in a temporary directory.

The cluster is made with the `initdb` and `pg_ctl` of the local PostgreSQL installation on a free port with trust
authentication. PostgreSQL refuses to run as root, so under root the commands run as the `postgres` user.
Tests skip when no installation is found (and fail under CI=true, like the shared server's tests).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

import pytest

__all__ = ["OwnPostgres", "find_postgres_bin"]


def find_postgres_bin() -> Optional[Path]:
    """The newest `bin` directory holding initdb and pg_ctl, or None."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda path: int(Path(path).parent.name))
    for candidate in reversed(candidates):
        if os.access(os.path.join(candidate, "initdb"), os.X_OK) and os.access(
            os.path.join(candidate, "pg_ctl"), os.X_OK
        ):
            return Path(candidate)
    for name in ("initdb", "pg_ctl"):
        if shutil.which(name) is None:
            return None
    return Path(shutil.which("pg_ctl") or "").parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OwnPostgres:
    """One private cluster: `start()`, `stop(mode)`, `dsn`; `cleanup()` stops it and removes its files."""

    def __init__(self) -> None:
        bin_dir = find_postgres_bin()
        if bin_dir is None:
            message = "no PostgreSQL installation (initdb, pg_ctl) to start a private server"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(message)
            pytest.skip(message)
        self.bin_dir = bin_dir
        self.directory = Path(tempfile.mkdtemp(prefix="agl-own-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self.port = _free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.directory, user="postgres", group="postgres")
        self._command(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", timeout=120
        )

    def _command(self, program: str, *args: str, timeout: float = 60) -> None:
        argv = [str(self.bin_dir / program), *args]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.directory)
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{program} failed ({result.returncode}): {result.stderr}{result.stdout}\n{log}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._command("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` ends the sessions, `immediate` is a crash (recovery runs at the next start)."""
        self._command("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def wait_accepting(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def cleanup(self) -> None:
        try:
            if self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
