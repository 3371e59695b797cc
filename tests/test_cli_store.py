"""`agl store` serves a store over HTTP, refuses unsafe or impossible setups with a clear message."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from agentlightning.store.client_server import LightningStoreClient


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _agl(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentlightning", "store", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _wait_healthy(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("agl store did not start")


def _wait_for_line(process: subprocess.Popen[str], text: str) -> list[str]:
    """Read stderr until a line contains `text` (the lines read so far)."""
    assert process.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} was not printed: {''.join(lines)}")


def test_agl_store_serves_a_memory_store_with_an_api_key() -> None:
    port = _free_port()
    process = _agl("--backend", "memory://", "--port", str(port), env={"AGL_STORE_API_KEY": "cli-key"})
    try:
        printed = "".join(_wait_for_line(process, "Dashboard: "))  # printed once it listens
        assert f"serving on http://127.0.0.1:{port}" in printed
        _wait_healthy(port, process)

        async def use() -> bool:
            client = LightningStoreClient(f"http://127.0.0.1:{port}", api_key="cli-key")
            rollout = await client.enqueue_rollout("from the cli test")
            claimed = await client.dequeue_rollout()
            await client.close()
            assert claimed is not None
            return claimed.rollout_id == rollout.rollout_id

        assert asyncio.run(use())
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, printed + stderr


def test_agl_store_refuses_workers_for_the_memory_backend() -> None:
    process = _agl("--backend", "memory://", "--workers", "2", "--port", str(_free_port()))
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "--workers 2 needs a backend shared across processes" in stderr


def test_agl_store_refuses_a_public_address_without_a_key() -> None:
    env = {key: value for key, value in os.environ.items() if key != "AGL_STORE_API_KEY"}
    process = subprocess.run(
        [sys.executable, "-m", "agentlightning", "store", "--host", "0.0.0.0", "--port", str(_free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert process.returncode == 2
    assert "without an API key" in process.stderr


def test_agl_store_reports_a_taken_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = _agl("--port", str(taken.getsockname()[1]))
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 1
    assert "Another process may already be using this port" in stderr
    assert "serving on" not in stderr and "Dashboard" not in stderr  # printed only once it listens


def test_agl_store_rejects_an_unknown_backend() -> None:
    process = _agl("--backend", "nosuch://x")
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2 and "Unknown store URL scheme" in stderr


def test_the_worker_app_factory_reads_its_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlightning.store.http.server.app import create_app_from_env

    monkeypatch.setenv("AGL_STORE_BACKEND", "memory://")
    monkeypatch.setenv("AGL_STORE_API_KEY", "worker-key")
    monkeypatch.setenv("AGL_STORE_MAX_BODY_BYTES", "2048")
    app = create_app_from_env()
    assert type(app.state.store).__name__ == "InMemoryLightningStore"
    middleware = {cls.__name__: options for cls, options in app.front_middleware}  # type: ignore[attr-defined]
    assert middleware["ApiKeyMiddleware"]["api_key"] == "worker-key"
    handler = app.state.operation_routes[0][2]._handler
    assert handler.limits.max_body_bytes == 2048


def test_the_worker_app_factory_needs_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlightning.store.http.server.app import create_app_from_env

    monkeypatch.delenv("AGL_STORE_BACKEND", raising=False)
    with pytest.raises(RuntimeError, match="AGL_STORE_BACKEND"):
        create_app_from_env()


def test_agl_store_runs_several_workers_over_one_sqlite_file(tmp_path: object) -> None:
    port = _free_port()
    database = os.path.join(str(tmp_path), "shared.db")
    process = _agl("--backend", f"sqlite:///{database}", "--workers", "2", "--port", str(port))
    try:
        _wait_healthy(port, process)

        async def use() -> tuple[list[str], list[str]]:
            clients = [LightningStoreClient(f"http://127.0.0.1:{port}") for _ in range(4)]
            try:
                enqueued = await asyncio.gather(*(clients[i % 4].enqueue_rollout(i) for i in range(40)))
                claimed = await asyncio.gather(*(clients[i % 4].dequeue_rollout() for i in range(60)))
            finally:
                await asyncio.gather(*(client.close() for client in clients))
            return [r.rollout_id for r in enqueued], [r.rollout_id for r in claimed if r is not None]

        enqueued, claimed = asyncio.run(use())
        assert sorted(claimed) == sorted(enqueued)
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert "with 2 workers" in stderr


def test_agl_store_with_a_missing_sqlite_directory_fails_at_start_in_one_line(tmp_path: object) -> None:
    process = _agl("--backend", f"sqlite:///{tmp_path}/no/such/dir/store.db", "--port", str(_free_port()))
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert stderr.startswith("agl store: ") and "does not exist" in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stderr and "serving on" not in stderr + stdout


@pytest.mark.postgres
@pytest.mark.parametrize("workers", ["1", "2"])
def test_agl_store_with_a_postgresql_database_that_does_not_exist_fails_at_start_in_one_line(workers: str) -> None:
    from tests.store.postgres_support import require_postgres

    dsn = require_postgres()
    base = dsn.rsplit("/", 1)[0]
    port = _free_port()
    process = _agl("--backend", f"{base}/agl_no_such_db", "--port", str(port), "--workers", workers)
    _, stderr = process.communicate(timeout=90)
    assert process.returncode == 1
    assert stderr.startswith("agl store: cannot open the store:") and "agl_no_such_db" in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    with pytest.raises(OSError):  # nothing listens: no server answering 500 to every call
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


async def test_health_is_not_ok_while_the_store_cannot_serve() -> None:
    from agentlightning.store import InMemoryLightningStore
    from agentlightning.store.client_server import LightningStoreServer
    from agentlightning.store.errors import StoreOpenError

    class BrokenStore(InMemoryLightningStore):
        broken = False

        async def get_latest_resources(self):  # type: ignore[no-untyped-def]
            if self.broken:
                raise StoreOpenError("Cannot connect to the PostgreSQL store: database is gone")
            return await super().get_latest_resources()

    store = BrokenStore()
    server = LightningStoreServer(store, port=0)
    await server.start()
    try:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.endpoint}/v1/agl/health") as response:
                assert response.status == 200
            store.broken = True
            async with session.get(f"{server.endpoint}/v1/agl/health") as response:
                body = await response.json()
                assert response.status == 503
                assert body["status"] == "unavailable" and "database is gone" in body["detail"]
            async with session.get(f"{server.endpoint}/v1/agl/resources/latest") as response:
                assert response.status == 503  # the cause, not "Internal server error"
                assert "database is gone" in (await response.json())["detail"]
    finally:
        await server.stop()


def test_a_sigterm_while_the_store_is_still_opening_stops_agl_store_cleanly() -> None:
    # A "database" that accepts the connection and never answers: the store stays in its start-up probe.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        process = _agl("--backend", f"postgresql://postgres@127.0.0.1:{port}/test", "--port", str(_free_port()))
        try:
            silent.settimeout(60)
            connection, _ = silent.accept()  # the start-up probe is under way
            with connection:
                process.send_signal(signal.SIGTERM)
                _, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert process.returncode == 0, stderr
    assert "stopped before it started serving" in stderr
    assert "Traceback" not in stderr
