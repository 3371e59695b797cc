"""A PostgreSQL outage behind a real `agl store` process: every write meets "unavailable, retry" (503 with
Retry-After and a JSON body naming the cause), never a 500, and once the database is back every write is
acknowledged exactly once: no result is lost and no rollout runs twice."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from .own_postgres import OwnPostgres

aiohttp = pytest.importorskip("aiohttp")
psycopg = pytest.importorskip("psycopg")

ROOT = Path(__file__).resolve().parents[2]
API = "/v1/agl"
ROUNDS_AFTER = 10
OUTAGE_SECONDS = 3.0
HANG_GUARD = 120.0
_CLI = "import sys; from agentlightning.cli.store import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Writer:
    """A client with unlimited patience for outages that records every answer it got."""

    def __init__(self, session: Any, endpoint: str) -> None:
        self.session = session
        self.endpoint = endpoint
        self.statuses: Counter[int] = Counter()
        self.unavailable: list[tuple[dict[str, str], Any]] = []
        self.unexpected: list[tuple[int, str]] = []

    async def write(self, path: str, body: dict[str, Any]) -> Any:
        """Send one write with an Idempotency-Key, again with the same key after a 503 or a connection failure."""
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        deadline = time.monotonic() + HANG_GUARD
        while time.monotonic() < deadline:
            try:
                async with self.session.post(self.endpoint + API + path, json=body, headers=headers) as response:
                    text = await response.text()
                    self.statuses[response.status] += 1
                    if response.status in (200, 201):
                        return json.loads(text)
                    if response.status != 503:
                        self.unexpected.append((response.status, text))
                        return None
                    self.unavailable.append((dict(response.headers), json.loads(text)))
                    await asyncio.sleep(min(float(response.headers.get("Retry-After", "1")), 0.5))
            except aiohttp.ClientError:
                await asyncio.sleep(0.2)
        raise AssertionError(f"{path} was not acknowledged within {HANG_GUARD} s")


async def _wait_healthy(session: Any, endpoint: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "agl store exited"
        try:
            async with session.get(endpoint + API + "/health") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("agl store never became healthy")


async def _run_rounds(writer: _Writer, done: list[str], outage_over: asyncio.Event) -> None:
    """Enqueue a rollout, claim it and report its attempt succeeded, round after round, until some rounds ran after
    the outage (so every round before, during and after it is checked)."""
    rounds_after = 0
    while rounds_after < ROUNDS_AFTER:
        if outage_over.is_set():
            rounds_after += 1
        index = len(done)
        enqueued = await writer.write("/queues/rollouts/enqueue", {"rollouts": [{"input": {"round": index}}]})
        assert enqueued is not None, writer.unexpected
        rollout_id = enqueued[0]["rollout_id"]
        claimed: Optional[list[dict[str, Any]]] = []
        while not claimed:
            claimed = await writer.write("/queues/rollouts/dequeue", {"limit": 1, "worker_id": "runner-1"})
            assert claimed is not None, writer.unexpected
        assert claimed[0]["rollout_id"] == rollout_id
        attempt_id = claimed[0]["attempt"]["attempt_id"]
        result = await writer.write(f"/rollouts/{rollout_id}/attempts/{attempt_id}", {"status": "succeeded"})
        assert result is not None, writer.unexpected
        done.append(rollout_id)


async def _outage(own_postgres: OwnPostgres, done: list[str], outage_over: asyncio.Event) -> None:
    while len(done) < 3:
        await asyncio.sleep(0.02)
    await asyncio.to_thread(own_postgres.stop, "fast")
    await asyncio.sleep(OUTAGE_SECONDS)
    await asyncio.to_thread(own_postgres.start)
    outage_over.set()


async def test_writes_during_a_postgres_outage_get_503_and_are_all_acknowledged_once_it_returns(
    own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    url = f"{own_postgres.dsn}?schema=agl_outage"
    log_path = tmp_path / "agl-store.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", _CLI, "--backend", url, "--port", str(port)], cwd=ROOT, stdout=log, stderr=log
        )
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            await _wait_healthy(session, endpoint, process)
            writer = _Writer(session, endpoint)
            done: list[str] = []
            over = asyncio.Event()
            rounds = asyncio.gather(_run_rounds(writer, done, over), _outage(own_postgres, done, over))
            await asyncio.wait_for(rounds, HANG_GUARD)
        assert process.poll() is None, "agl store died during the outage"
    finally:
        process.terminate()
        process.wait(30)
    log_text = log_path.read_text(errors="replace")
    assert writer.unexpected == [], f"answers other than 2xx/503: {writer.unexpected}\n{log_text[-3000:]}"
    assert writer.statuses[503] > 0, f"the outage was never seen: {writer.statuses}"
    for headers, body in writer.unavailable:
        assert int(headers["Retry-After"]) >= 1
        assert body["error_type"] == "StoreUnavailableError", body
        assert "PostgreSQL" in body["detail"], body
    with psycopg.connect(own_postgres.dsn, options="-c search_path=agl_outage") as conn:
        rollouts = conn.execute("SELECT rollout_id, status FROM rollouts").fetchall()
        attempts = conn.execute("SELECT rollout_id, COUNT(*) FROM attempts GROUP BY rollout_id").fetchall()
    assert sorted(rollouts) == sorted((rollout_id, "succeeded") for rollout_id in done), "a result was lost"
    assert all(count == 1 for _, count in attempts), f"a rollout ran twice: {attempts}"


async def test_a_postgres_store_used_directly_raises_store_unavailable_error_while_its_server_is_down(
    own_postgres: OwnPostgres,
) -> None:
    from agentlightning.store import StoreUnavailableError
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = PostgresLightningStore(own_postgres.dsn, schema="agl_direct", pool_size=2)
    try:
        await store.enqueue_rollout("before")
        await asyncio.to_thread(own_postgres.stop, "immediate")  # a crash: sessions vanish without a goodbye
        for _ in range(2):  # a pooled connection that died with the server, then a refused reconnect
            with pytest.raises(StoreUnavailableError, match=r"PostgreSQL store .* is unavailable") as caught:
                await store.enqueue_rollout("during")
            assert isinstance(caught.value, ConnectionError)  # runners ride it out like an unreachable server
        assert isinstance(store.write_problem, StoreUnavailableError)
        await asyncio.to_thread(own_postgres.start)
        await store.enqueue_rollout("after")
        assert store.write_problem is None
        assert sorted(rollout.input for rollout in await store.query_rollouts()) == ["after", "before"]
    finally:
        await store.close()
