"""A store server killed right after an enqueue committed, before it answered: the same request sent again (same
Idempotency-Key) to the server restarted on the same database returns the rollout the first try created, at once,
instead of waiting for an answer nobody will write and then enqueuing a second rollout (real `agl store` processes
on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
from typing import Any

import pytest

from agentlightning.store.http.server.faults import KILL_AFTER_COMMIT_ENV

from ..._store_server import StoreServerProcess
from ..durable_support import DurableDatabase

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

ENQUEUE = "/v1/agl/queues/rollouts/enqueue"
RETRY_TIMEOUT = 30.0
"""Well below the 120 s a retry waits for the answer of a record left in flight."""


def _post(port: int, body: Any, key: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=RETRY_TIMEOUT)
    try:
        connection.request(
            "POST",
            ENQUEUE,
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.mark.slow
async def test_an_enqueue_retried_after_the_server_died_between_its_commit_and_its_answer_returns_that_rollout(
    durable: DurableDatabase,
) -> None:
    body = {"rollouts": [{"input": {"question": 1}, "metadata": {"marker": "killed"}}]}
    server = StoreServerProcess(backend=durable.url)
    try:
        server.start(env={KILL_AFTER_COMMIT_ENV: "enqueue_many_rollouts"})
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            await asyncio.to_thread(_post, server.port, body, "key-killed")
        assert server.process is not None
        assert server.process.wait(30) == -signal.SIGKILL  # it died after the commit, as asked
        server.start()
        status, headers, answer = await asyncio.to_thread(_post, server.port, body, "key-killed")
    finally:
        server.kill()
    assert status == 201, answer
    assert headers.get("idempotent-replayed") == "true"
    store = durable.open()
    stored = await store.query_rollouts()
    assert [rollout.rollout_id for rollout in stored] == [json.loads(answer)[0]["rollout_id"]]
    assert stored[0].metadata == {"marker": "killed"}
