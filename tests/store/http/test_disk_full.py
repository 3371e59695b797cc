"""A full disk under an SQLite store: writes answer 507 naming the cause (one log line per burst, no tracebacks),
/health reports it, and writes resume once space returns.

Two real ways to fill the database: SQLite's own limit on the file's pages (`PRAGMA max_page_count`), which makes
the engine raise SQLITE_FULL exactly as it does on a full disk and runs anywhere; and a real full file system (a
small tmpfs under a real `agl store` process), where mounting is allowed (root), else skipped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from agentlightning.store.client_server import LightningStoreServer
from agentlightning.store.sqlite.storage import SqliteStorage
from agentlightning.store.sqlite.store import SqliteLightningStore

from .conftest import Answer, call, start_server, stop_server

ROOT = Path(__file__).resolve().parents[3]
API = "/v1/agl"
_CLI = "import sys; from agentlightning.cli.store import main; sys.exit(main(sys.argv[1:]))"
BIG_INPUT = "x" * 256 * 1024  # needs new pages (and new disk blocks) wherever it is stored


def _enqueue(port_or_server: Any, text: str = BIG_INPUT, *, keyed: bool = True) -> Answer:
    """Enqueue one rollout; `keyed` as the client does (without a key no idempotency answer is written later)."""
    body = {"rollouts": [{"input": text}]}
    headers = {"Idempotency-Key": uuid.uuid4().hex} if keyed else {}
    return call(port_or_server, "POST", f"{API}/queues/rollouts/enqueue", body, headers=headers)


def _connection(store: SqliteLightningStore) -> sqlite3.Connection:
    """The storage's own connection (`max_page_count` is a property of the connection)."""
    storage = store._storage
    assert isinstance(storage, SqliteStorage) and storage._conn is not None
    return storage._conn


def _set_max_pages(store: SqliteLightningStore, pages: int) -> None:
    _connection(store).execute(f"PRAGMA max_page_count = {pages}")


def _fill_database(store: SqliteLightningStore) -> None:
    """No page may be added any more: the next write that needs one fails with SQLITE_FULL."""
    _set_max_pages(store, int(_connection(store).execute("PRAGMA page_count").fetchone()[0]))


def test_a_full_sqlite_database_answers_507_once_logged_reported_by_health_and_writes_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteLightningStore(str(tmp_path / "store.db"))
    server = start_server(store)
    try:
        assert _enqueue(server, "small", keyed=False).status == 201
        _fill_database(store)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            refused = [_enqueue(server) for _ in range(5)]
            health = call(server, "GET", f"{API}/health")
        for answer in refused:
            assert answer.status == 507, answer.body
            assert answer.headers["retry-after"] == "5"
            assert answer.json["error_type"] == "StoreFullError"
            assert "full" in answer.json["detail"] and "store.db" in answer.json["detail"]
        assert health.status == 503
        assert health.json["error_type"] == "StoreFullError", health.json
        assert "full" in health.json["detail"]
        full_lines = [record for record in caplog.records if "full" in record.getMessage()]
        assert len(full_lines) == 1, [record.getMessage() for record in caplog.records]
        assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR]

        _set_max_pages(store, 1 << 30)  # space returns
        with caplog.at_level(logging.INFO):
            resumed = _enqueue(server)
            health = call(server, "GET", f"{API}/health")
        assert resumed.status == 201, resumed.body
        assert health.status == 200 and health.json == {"status": "ok"}
        assert any("works again" in record.getMessage() for record in caplog.records)
    finally:
        stop_server(server)
        asyncio.run(store.close())


def test_a_full_database_raises_store_full_error_in_process(tmp_path: Path) -> None:
    from agentlightning.store import StoreFullError

    async def scenario() -> None:
        store = SqliteLightningStore(str(tmp_path / "store.db"))
        try:
            await store.enqueue_rollout("small")
            _fill_database(store)
            with pytest.raises(StoreFullError, match="is full"):
                await store.enqueue_rollout(BIG_INPUT)
            assert isinstance(store.write_problem, StoreFullError)
            assert len(await store.query_rollouts()) == 1  # reads still work
            _set_max_pages(store, 1 << 30)
            await store.enqueue_rollout(BIG_INPUT)
            assert store.write_problem is None
        finally:
            await store.close()

    asyncio.run(scenario())


# ---------------------------------------------------------------------------------------------- a real full disk
@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (needs the right to mount: root)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode(errors='replace').strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    return filler


class _Port:
    """What `call` needs of a server: its port."""

    def __init__(self, port: int) -> None:
        self.port = port


def test_agl_store_on_a_full_disk_answers_507_and_resumes_when_space_returns(small_tmpfs: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log_path = small_tmpfs.parent / "agl-store.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", _CLI, "--backend", f"sqlite:///{small_tmpfs / 'store.db'}", "--port", str(port)],
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )
    server = cast(LightningStoreServer, _Port(port))
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                if call(server, "GET", f"{API}/health").status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "agl store never became healthy"
            time.sleep(0.1)
        assert _enqueue(server, "small", keyed=False).status == 201
        filler = _fill(small_tmpfs)
        refused = [_enqueue(server) for _ in range(3)]
        health = call(server, "GET", f"{API}/health")
        filler.unlink()  # space returns
        resumed = _enqueue(server)
        health_after = call(server, "GET", f"{API}/health")
    finally:
        process.terminate()
        process.wait(30)
    log_text = log_path.read_text(errors="replace")
    assert [answer.status for answer in refused] == [507, 507, 507], [answer.body for answer in refused]
    assert json.loads(refused[0].body)["error_type"] == "StoreFullError"
    assert health.status == 503 and health.json["error_type"] == "StoreFullError"
    assert resumed.status == 201, resumed.body
    assert health_after.status == 200
    assert "Traceback" not in log_text, log_text
    assert log_text.count("writes are refused") == 1, log_text
