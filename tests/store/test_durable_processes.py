"""Durable stores with real processes: writers killed with SIGKILL lose nothing they acknowledged, and processes
dequeuing from one database each get different rollouts."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentlightning.types import EnqueueRolloutRequest

from .durable_support import DurableDatabase
from .process_workers import WRITER_TIMEOUT_SECONDS

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD = 60.0

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


def _worker(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.store.process_workers", *args], cwd=ROOT, text=True, **kwargs)


def _read_acks(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


async def _run_and_kill(url: str, ack_path: Path, name: str, rng: random.Random) -> None:
    """Start a writer, let it work for a random moment after it is ready, then SIGKILL it."""

    def spans_acked() -> int:
        return sum(ack["kind"] == "spans" for ack in _read_acks(ack_path))

    before = spans_acked()
    process = _worker("writer", url, str(ack_path), name, stderr=subprocess.PIPE)
    deadline = time.monotonic() + HANG_GUARD
    while spans_acked() <= before:  # it has done real work (however slow the machine), then dies at a random moment
        if process.poll() is not None:
            pytest.fail(f"writer exited early: {process.stderr.read() if process.stderr else ''}")
        assert time.monotonic() < deadline, "writer never became ready"
        await asyncio.sleep(0.02)
    await asyncio.sleep(rng.uniform(0.1, 0.5))
    process.send_signal(signal.SIGKILL)
    process.wait(HANG_GUARD)
    if process.stderr:
        process.stderr.close()


async def test_acknowledged_writes_survive_sigkill_and_running_attempts_are_requeued(
    durable: DurableDatabase, tmp_path: Path
) -> None:
    rng = random.Random(20240607)
    ack_path = tmp_path / "acks.jsonl"
    durable.open()  # create the schema before the writers race for it
    for round_index in range(4):
        await _run_and_kill(durable.url, ack_path, f"writer-{round_index}", rng)
    acks = _read_acks(ack_path)
    assert sum(ack["kind"] == "spans" for ack in acks) >= 4, "the writers did too little work to test anything"

    store = durable.open()
    for ack in acks:
        kind = ack["kind"]
        if kind == "enqueued":
            assert await store.get_rollout_by_id(ack["rollout_id"]) is not None
        elif kind == "dequeued":
            attempts = await store.query_attempts(ack["rollout_id"])
            assert ack["attempt_id"] in [a.attempt_id for a in attempts]
        elif kind == "spans":
            stored = await store.query_spans(ack["rollout_id"], ack["attempt_id"])
            assert set(ack["span_ids"]) <= {s.span_id for s in stored}
        elif kind == "intent":  # a batch is stored whole or not at all
            stored = {s.span_id for s in await store.query_spans(ack["rollout_id"], ack["attempt_id"])}
            assert len(stored & set(ack["span_ids"])) in (0, len(ack["span_ids"]))
        elif kind == "succeeded":
            rollout = await store.get_rollout_by_id(ack["rollout_id"])
            assert rollout is not None and rollout.status == "succeeded"
        elif kind == "resources":
            assert await store.get_resources_by_id(ack["resources_id"]) is not None

    await asyncio.sleep(WRITER_TIMEOUT_SECONDS + 0.2)
    rollouts = await store.query_rollouts()  # runs the health check
    assert not [r.rollout_id for r in rollouts if r.status in ("preparing", "running")]
    stranded = [r for r in rollouts if r.status == "requeuing"]
    assert stranded, "some attempt should have been running when its writer was killed"
    for rollout in stranded:
        assert rollout.attempt.status == "timeout"  # type: ignore[attr-defined]
    queued_ids = {r.rollout_id for r in rollouts if r.status in ("queuing", "requeuing")}
    claimed = await store.dequeue_many_rollouts(limit=10_000)
    assert sorted(r.rollout_id for r in claimed) == sorted(queued_ids)


@pytest.mark.parametrize("processes", [4])
async def test_processes_dequeuing_from_one_database_get_each_rollout_once(
    durable: DurableDatabase, processes: int, tmp_path: Path
) -> None:
    store = durable.open()
    queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(240)])
    gate = tmp_path / "go"
    workers = [
        _worker("dequeuer", durable.url, f"worker-{index}", str(gate), stdout=subprocess.PIPE)
        for index in range(processes)
    ]
    deadline = time.monotonic() + HANG_GUARD
    while len(list(tmp_path.glob("go.worker-*"))) < processes:  # all started and connected: open the gate
        assert all(w.poll() is None for w in workers), "a dequeuer exited before the start"
        assert time.monotonic() < deadline, "the dequeuers never became ready"
        await asyncio.sleep(0.02)
    gate.touch()
    claims: list[list[str]] = []
    for worker in workers:
        out, _ = await asyncio.to_thread(worker.communicate, timeout=HANG_GUARD)
        assert worker.returncode == 0
        claims.append(json.loads(out.strip().splitlines()[-1]))
    counts = Counter(rollout_id for claimed in claims for rollout_id in claimed)
    assert counts == Counter(r.rollout_id for r in queued)
    assert sum(1 for claimed in claims if claimed) >= 2, "the processes did not overlap"
