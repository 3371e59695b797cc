"""Worker processes for the multi-process tests: `python -m tests.store.process_workers <role> <args>`.

`writer URL ACK_FILE NAME`: loops enqueue / dequeue / add spans / succeed / add resources forever and appends one
JSON line to ACK_FILE after each call returns (and an "intent" line before each span batch), written with os.write
so that every line survives a SIGKILL. `dequeuer URL NAME GATE`: waits until the file GATE exists, dequeues
until the queue is empty and prints the claimed rollout ids as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from agentlightning.store import store_from_url
from agentlightning.types import LLM, RolloutConfig

from .helpers import make_span

#: Attempts of the crash writer time out after this many seconds (the test waits for it after the crashes).
WRITER_TIMEOUT_SECONDS = 1.0


async def writer(url: str, ack_path: str, name: str) -> None:
    store = store_from_url(url)
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def ack(kind: str, **data: object) -> None:
        os.write(fd, (json.dumps({"kind": kind, **data}) + "\n").encode())

    config = RolloutConfig(timeout_seconds=WRITER_TIMEOUT_SECONDS, max_attempts=10, retry_condition=["timeout"])
    ack("ready")
    step = 0
    while True:
        step += 1
        rollout = await store.enqueue_rollout({"writer": name, "step": step}, config=config)
        ack("enqueued", rollout_id=rollout.rollout_id)
        claimed = await store.dequeue_rollout(worker_id=name)
        if claimed is None:
            continue
        rollout_id, attempt_id = claimed.rollout_id, claimed.attempt.attempt_id
        ack("dequeued", rollout_id=rollout_id, attempt_id=attempt_id)
        spans = [make_span(rollout_id, attempt_id, index) for index in range(1, 6)]
        span_ids = [span.span_id for span in spans]
        ack("intent", rollout_id=rollout_id, attempt_id=attempt_id, span_ids=span_ids)
        await store.add_many_spans(spans)
        ack("spans", rollout_id=rollout_id, attempt_id=attempt_id, span_ids=span_ids)
        if step % 3 == 0:
            await store.update_attempt(rollout_id, attempt_id, status="succeeded")
            ack("succeeded", rollout_id=rollout_id)
        if step % 4 == 0:
            update = await store.add_resources({"llm": LLM(endpoint="http://127.0.0.1:1/v1", model=f"m{step}")})
            ack("resources", resources_id=update.resources_id)


async def dequeuer(url: str, name: str, gate: str) -> None:
    """Claim rollouts until the queue is empty. Starts when the file `gate` exists, after writing `gate.<name>` to say
    it is ready (imports done, store open), so that slow starts on a loaded machine cannot serialise the workers."""
    store = store_from_url(url)
    await store.statistics()
    Path(f"{gate}.{name}").touch()
    while not Path(gate).exists():
        await asyncio.sleep(0.01)
    claimed: list[str] = []
    while True:
        rollout = await store.dequeue_rollout(worker_id=name)
        if rollout is None:
            break
        claimed.append(rollout.rollout_id)
        if len(claimed) == 1:
            await _wait_for_a_second_claimer(gate, name)
    await store.close()
    print(json.dumps(claimed), flush=True)


async def _wait_for_a_second_claimer(gate: str, name: str, timeout: float = 10.0) -> None:
    """After its first claim a dequeuer waits (up to `timeout`) until another process has claimed one too: on a loaded
    machine the first process to wake could otherwise drain the whole queue before the others were scheduled, and the
    test would check nothing about concurrent claims."""
    Path(f"{gate}.{name}.claimed").touch()
    directory, stem = Path(gate).parent, Path(gate).name
    deadline = asyncio.get_running_loop().time() + timeout
    while len(list(directory.glob(f"{stem}.*.claimed"))) < 2 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)


def main(argv: list[str]) -> None:
    role, *args = argv
    if role == "writer":
        asyncio.run(writer(args[0], args[1], args[2]))
    elif role == "dequeuer":
        asyncio.run(dequeuer(args[0], args[1], args[2]))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
