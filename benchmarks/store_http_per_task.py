"""Short-lived clients: every task opens its own `LightningStoreClient` in its own `asyncio.run`.

This is how many runner scripts use the store: N processes loop over tasks, and each task is
`asyncio.run(task())` with a fresh client (so a fresh event loop, session and TCP connection). Variants:

- `full`: start_rollout, 4 x add_span, update_attempt(succeeded)   (6 requests per task)
- `claim-update`: dequeue_rollout, update_attempt(succeeded)        (2 requests; rollouts are queued beforehand)
- `claim`: dequeue_rollout                                          (1 request; rollouts are queued beforehand)

Every request is timed by the client (perf_counter around the awaited call), so p50/p99 are measured latencies over
all requests, not histogram buckets. The task rate counts tasks finished per second over the measured window.
`--first-request` instead starts fresh interpreters that `import agentlightning`, then time the first request of a
new client (what a short-lived script pays once).

    .venv/bin/python benchmarks/store_http.py --client-per-task --task full --processes 16 --seconds 20
    .venv/bin/python benchmarks/store_http.py --client-per-task --task claim-update
    .venv/bin/python benchmarks/store_http.py --client-per-task --task claim
    .venv/bin/python benchmarks/store_http.py --client-per-task --first-request --runs 10
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
from typing import Any

TASKS = ("full", "claim-update", "claim")


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of the measured values (nearest rank)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _one_task(url: str, task: str, worker: str, latencies: list[float]) -> bool:
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.types import Span, TraceStatus

    client = LightningStoreClient(url)
    if os.environ.get("_AGL_HTTP_CLIENT") == "httpx":  # `store_http.py --client httpx`
        from _httpx_session import use_httpx

        use_httpx(client)

    async def timed(call: Any) -> Any:
        started = time.perf_counter()
        result = await call
        latencies.append((time.perf_counter() - started) * 1000)
        return result

    try:
        if task == "full":
            attempted = await timed(client.start_rollout({"question": "1+1", "worker": worker}, worker_id=worker))
        else:
            attempted = await timed(client.dequeue_rollout(worker_id=worker))
            if attempted is None:
                return False
        rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
        if task == "full":
            for index in range(4):
                span = Span.from_attributes(
                    attributes={"gen_ai.prompt": "x" * 200, "index": index},
                    rollout_id=rollout_id,
                    attempt_id=attempt_id,
                    sequence_id=index + 1,
                    name="llm.call",
                    status=TraceStatus(status_code="OK"),
                )
                await timed(client.add_span(span))
        if task in ("full", "claim-update"):
            await timed(client.update_attempt(rollout_id, attempt_id, status="succeeded"))
        return True
    finally:
        await client.close()


def _process(url: str, task: str, seconds: float, index: int, queue: Any, start: Any) -> None:
    import agentlightning  # noqa: F401  (imported before the clock starts, like a runner script)

    start.wait()  # a barrier: every process has imported before any starts
    latencies: list[float] = []
    stamps: list[float] = []
    task_ms: list[float] = []
    worker = f"worker-{index}"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        if asyncio.run(_one_task(url, task, worker, latencies)):
            stamps.append(time.monotonic())
            task_ms.append((time.perf_counter() - started) * 1000)
    queue.put({"latencies": latencies, "stamps": stamps, "task_ms": task_ms})


def _prefill(url: str, count: int) -> None:
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.types import EnqueueRolloutRequest

    async def fill() -> None:
        client = LightningStoreClient(url)
        try:
            for start in range(0, count, 500):
                batch = [EnqueueRolloutRequest(input={"i": start + i}) for i in range(min(500, count - start))]
                await client.enqueue_many_rollouts(batch)
        finally:
            await client.close()

    asyncio.run(fill())


def _socket_states(port: int) -> dict[str, int]:
    """Counts of TCP states of sockets on the server's port (from `ss`), e.g. TIME-WAIT left behind."""
    try:
        out = subprocess.run(["ss", "-tan"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    counts: dict[str, int] = {}
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 5 and (fields[3].endswith(f":{port}") or fields[4].endswith(f":{port}")):
            counts[fields[0]] = counts.get(fields[0], 0) + 1
    return counts


def run_tasks(url: str, task: str, processes: int, seconds: float, prefill: int) -> dict[str, Any]:
    """Run the task loop in `processes` processes; the measured figures."""
    if task != "full":
        _prefill(url, prefill)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start = context.Barrier(processes + 1)
    workers = [context.Process(target=_process, args=(url, task, seconds, i, queue, start)) for i in range(processes)]
    for worker in workers:
        worker.start()
    start.wait(timeout=300)
    began = time.monotonic()
    results = [queue.get(timeout=seconds + 180) for _ in workers]
    for worker in workers:
        worker.join(30)
    latencies = [value for result in results for value in result["latencies"]]
    stamps = [value for result in results for value in result["stamps"]]
    task_ms = [value for result in results for value in result["task_ms"]]
    elapsed = max(stamps) - began if stamps else seconds
    port = int(url.rsplit(":", 1)[1])
    return {
        "task": task,
        "processes": processes,
        "tasks": len(stamps),
        "elapsed": elapsed,
        "tasks_per_s": len(stamps) / elapsed if elapsed > 0 else 0.0,
        "requests": len(latencies),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies) if latencies else float("nan"),
        "over_1s": sum(1 for value in latencies if value > 1000),
        "task_p50_ms": percentile(task_ms, 0.5),
        "task_p99_ms": percentile(task_ms, 0.99),
        "outside_requests_ms": (sum(task_ms) - sum(latencies)) / max(1, len(task_ms)),
        "sockets_after": _socket_states(port),
    }


_FIRST_REQUEST = r"""
import asyncio, json, sys, time
t0 = time.perf_counter()
import agentlightning as agl
t1 = time.perf_counter()

async def main():
    started = time.perf_counter()
    client = agl.LightningStoreClient(sys.argv[1])
    if len(sys.argv) > 2:  # `store_http.py --client httpx`: the benchmarks folder, for _httpx_session
        sys.path.insert(0, sys.argv[2])
        from _httpx_session import use_httpx
        use_httpx(client)
    await client.query_rollouts(limit=1)
    first = time.perf_counter() - started
    started = time.perf_counter()
    await client.query_rollouts(limit=1)
    second = time.perf_counter() - started
    await client.close()
    return first, second

first, second = asyncio.run(main())
print(json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": first * 1000, "second_ms": second * 1000}))
"""


def _httpx_argument() -> list[str]:
    """The benchmarks folder, passed to a first-request process when the clients speak through httpx."""
    return [os.path.dirname(os.path.abspath(__file__))] if os.environ.get("_AGL_HTTP_CLIENT") == "httpx" else []


def first_request(url: str, runs: int) -> dict[str, Any]:
    """Fresh interpreters: `import agentlightning`, then the first request of a new client (its construction, the
    imports it needs, and the request) and a second request. Medians of each part and of import plus first request
    (`total_ms`: what a fresh process pays before its first answer, wherever the imports happen)."""
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_REQUEST, url, *_httpx_argument()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        sample = json.loads(out.strip().splitlines()[-1])
        samples.append(sample | {"total_ms": sample["import_ms"] + sample["first_ms"]})
    medians = ("import_ms", "first_ms", "second_ms", "total_ms")
    return {key: percentile([sample[key] for sample in samples], 0.5) for key in medians} | {
        "runs": runs,
        "first_max_ms": max(sample["first_ms"] for sample in samples),
        "rounds_total_ms": [round(sample["total_ms"], 2) for sample in samples],
    }
