"""Store workloads that run unchanged against this package and against the reference agentlightning 0.3.0.

`benchmarks/store_reference.py` runs this file with each package's interpreter and reads the one JSON line it
prints. Only the public API both packages share is used: `InMemoryLightningStore`, `agl store` and
`LightningStoreClient`, `enqueue_many_rollouts`, `dequeue_rollout(worker_id=...)`, `add_span`, `update_attempt`,
`update_worker`, `query_workers`, `query_rollouts`, `wait_for_rollouts`, `Span.from_attributes`, and for the trainer
loop `Trainer`, `Algorithm` and `LitAgent`.

    python benchmarks/_store_workloads.py micro-rollout --transport memory --workers 32 --rollouts 2000
    python benchmarks/_store_workloads.py micro-worker --transport http --workers 32 --seconds 5

Workloads:
- micro-rollout: `--workers` tasks each loop dequeue -> `--spans` spans -> update_attempt(succeeded) until the
  pre-filled queue of `--rollouts` is empty; rollouts/s and the per-rollout latency (dequeue to finished attempt).
- micro-dequeue-only: the same tasks only dequeue from a pre-filled queue; dequeues/s.
- micro-worker: `--workers` tasks each loop update_worker (a heartbeat with stats) for `--seconds`, while
  `--readers` tasks loop a snapshot read (query_workers, then query_rollouts over `--rollouts` stored rollouts);
  operations/s and the latency of each kind.
- trainer-loop: `Trainer.fit` of a no-op agent over `--rollouts` tasks with `--runners` runners; rollouts/s over the
  whole `fit`, start-up included, and at steady state: the rollouts that finished after the first half did, over the
  time from the half-way rollout's end to the last one's (the store's `end_time` of each rollout; `steady_rate`).

`--transport memory` calls an InMemoryLightningStore in this process; `--transport http` starts the package's own
`agl store --host 127.0.0.1 --port P` (in-memory backend, its own process, as a user runs a store server) and calls
it through LightningStoreClient. Each task yields to the event loop after
each iteration (`asyncio.sleep(0)`): a call to an in-memory store may complete without ever suspending, and without
the yield one task would run its whole loop before the others start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import agentlightning as agl

WORKLOADS = ("micro-rollout", "micro-dequeue-only", "micro-worker", "trainer-loop")


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _latency_summary(prefix: str, seconds: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_p50_ms": round(_percentile(seconds, 0.50) * 1000, 3),
        f"{prefix}_p99_ms": round(_percentile(seconds, 0.99) * 1000, 3),
        f"{prefix}_max_ms": round(max(seconds) * 1000 if seconds else float("nan"), 3),
    }


# ------------------------------------------------------------------------------------------------- store set-up
def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Store:
    """The store under test: in this process, or a server child process and a client."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.server: Optional[subprocess.Popen[bytes]] = None
        self.store: Any = None

    async def __aenter__(self) -> Any:
        if self.transport == "memory":
            from agentlightning.store import InMemoryLightningStore

            self.store = InMemoryLightningStore()
            return self.store
        from agentlightning.store.client_server import LightningStoreClient

        port = _free_port()
        # A store server as a user starts one: `agl store`, in its own process, on the default in-memory backend.
        agl_command = Path(sys.executable).with_name("agl")
        server = self.server = subprocess.Popen(
            [str(agl_command), "store", "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300  # the reference's CLI imports litellm: minutes on a loaded machine
        while not _accepts_connections(port):
            if server.poll() is not None:
                raise RuntimeError(f"`agl store` exited with code {server.returncode} before serving")
            if time.monotonic() > deadline:
                raise RuntimeError("`agl store` did not accept connections within 300 s")
            await asyncio.sleep(0.1)
        self.store = LightningStoreClient(f"http://127.0.0.1:{port}")
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            await close()
        if self.server is not None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.server.kill()


async def _prefill(store: Any, count: int) -> list[str]:
    from agentlightning.types import EnqueueRolloutRequest

    ids: list[str] = []
    for start in range(0, count, 500):
        batch = [EnqueueRolloutRequest(input={"task": i}, mode="train") for i in range(start, min(count, start + 500))]
        ids.extend(rollout.rollout_id for rollout in await store.enqueue_many_rollouts(batch))
    return ids


# ---------------------------------------------------------------------------------------------------- workloads
async def micro_rollout(args: argparse.Namespace) -> dict[str, Any]:
    from agentlightning.types import Span

    async with _Store(args.transport) as store:
        await _prefill(store, args.rollouts)
        latencies: list[float] = []

        async def worker(index: int) -> None:
            worker_id = f"worker-{index}"
            while True:
                started = time.perf_counter()
                attempted = await store.dequeue_rollout(worker_id=worker_id)
                if attempted is None:
                    return
                rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
                for sequence_id in range(1, args.spans + 1):
                    span = Span.from_attributes(
                        attributes={"step": sequence_id, "worker": worker_id},
                        rollout_id=rollout_id,
                        attempt_id=attempt_id,
                        sequence_id=sequence_id,
                        name=f"step-{sequence_id}",
                    )
                    await store.add_span(span)
                await store.update_attempt(rollout_id, attempt_id, status="succeeded", worker_id=worker_id)
                latencies.append(time.perf_counter() - started)
                await asyncio.sleep(0)  # the other workers' turn (an in-memory store call may never suspend)

        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(args.workers)))
        elapsed = time.perf_counter() - started
    if len(latencies) != args.rollouts:
        raise RuntimeError(f"micro-rollout finished {len(latencies)} of {args.rollouts} rollouts")
    return {"rollouts_per_s": round(len(latencies) / elapsed, 2), **_latency_summary("rollout", latencies)}


async def micro_dequeue_only(args: argparse.Namespace) -> dict[str, Any]:
    async with _Store(args.transport) as store:
        await _prefill(store, args.rollouts)
        dequeued = 0

        async def worker(index: int) -> None:
            nonlocal dequeued
            while await store.dequeue_rollout(worker_id=f"worker-{index}") is not None:
                dequeued += 1
                await asyncio.sleep(0)

        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(args.workers)))
        elapsed = time.perf_counter() - started
    if dequeued != args.rollouts:
        raise RuntimeError(f"micro-dequeue-only dequeued {dequeued} of {args.rollouts} rollouts")
    return {"dequeues_per_s": round(dequeued / elapsed, 2)}


async def micro_worker(args: argparse.Namespace) -> dict[str, Any]:
    async with _Store(args.transport) as store:
        await _prefill(store, args.rollouts)
        for index in range(args.workers):  # some rollouts running, as in a training job
            await store.dequeue_rollout(worker_id=f"worker-{index}")
        heartbeats: list[float] = []
        snapshots: list[float] = []
        deadline = time.perf_counter() + args.seconds

        async def heartbeat(index: int) -> None:
            worker_id = f"worker-{index}"
            beat = 0
            while time.perf_counter() < deadline:
                beat += 1
                started = time.perf_counter()
                await store.update_worker(worker_id, {"beat": beat, "queue_depth": index % 7, "gpu_util": 0.5})
                heartbeats.append(time.perf_counter() - started)
                await asyncio.sleep(0)

        async def snapshot() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                workers = await store.query_workers()
                rollouts = await store.query_rollouts()
                snapshots.append(time.perf_counter() - started)
                await asyncio.sleep(0)
                if len(workers) < args.workers or len(rollouts) < args.rollouts:
                    raise RuntimeError(f"snapshot saw {len(workers)} workers and {len(rollouts)} rollouts")

        started = time.perf_counter()
        await asyncio.gather(*(heartbeat(i) for i in range(args.workers)), *(snapshot() for _ in range(args.readers)))
        elapsed = time.perf_counter() - started
    operations = len(heartbeats) + len(snapshots)
    return {
        "operations_per_s": round(operations / elapsed, 2),
        "heartbeats_per_s": round(len(heartbeats) / elapsed, 2),
        "snapshots_per_s": round(len(snapshots) / elapsed, 2),
        **_latency_summary("operation", heartbeats + snapshots),
        **_latency_summary("heartbeat", heartbeats),
        **_latency_summary("snapshot", snapshots),
    }


class NoOpAgent(agl.LitAgent):  # type: ignore[type-arg]
    """Returns a reward of 1.0 at once (module level: the cs strategy sends it to spawned runner processes)."""

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        return 1.0


class EnqueueAllWaitAll(agl.Algorithm):
    """Enqueues every task in one call and waits until all of them finished."""

    finished: int = 0
    end_times: list[float]  # each finished rollout's end_time (set before `fit`)

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        from agentlightning.types import EnqueueRolloutRequest

        store = self.get_store()
        # The reference's runners skip a rollout when the store holds no resources.
        await store.add_resources({"prompt": agl.PromptTemplate(template="{task}", engine="f-string")})
        requests = [EnqueueRolloutRequest(input=task, mode="train") for task in train_dataset]
        pending = {rollout.rollout_id for rollout in await store.enqueue_many_rollouts(requests)}
        while pending:
            done = await store.wait_for_rollouts(rollout_ids=sorted(pending), timeout=1.0)
            pending -= {rollout.rollout_id for rollout in done}
            self.finished += len(done)
            self.end_times += [rollout.end_time for rollout in done if rollout.end_time is not None]


def steady_rate(end_times: list[float], warm_up: float = 0.5) -> float:
    """Rollouts/s once warmed up: of the rollouts sorted by end time, those after the first `warm_up` share, over the
    seconds from the end of the last warm-up rollout to the end of the last rollout (start-up excluded)."""
    if not 0 <= warm_up < 1:
        raise ValueError(f"warm_up must be in [0, 1), not {warm_up}")
    ordered = sorted(end_times)
    first = max(1, int(len(ordered) * warm_up))  # the warm-up's last rollout marks the start of the steady span
    if len(ordered) - first < 1:
        raise ValueError(f"{len(ordered)} end times leave no rollout after the warm-up")
    seconds = ordered[-1] - ordered[first - 1]
    if seconds <= 0:
        raise ValueError("the rollouts after the warm-up all ended at the same instant: no rate")
    return (len(ordered) - first) / seconds


def trainer_loop(args: argparse.Namespace) -> dict[str, Any]:
    """Trainer.fit of a no-op agent over `--rollouts` tasks, start-up included."""
    algorithm = EnqueueAllWaitAll()
    algorithm.end_times = []
    trainer = agl.Trainer(algorithm=algorithm, n_runners=args.runners, strategy={"type": args.strategy})
    started = time.perf_counter()
    trainer.fit(NoOpAgent(), train_dataset=[{"task": i} for i in range(args.rollouts)])
    elapsed = time.perf_counter() - started
    if algorithm.finished != args.rollouts:
        raise RuntimeError(f"trainer-loop finished {algorithm.finished} instead of {args.rollouts} rollouts")
    if len(algorithm.end_times) != args.rollouts:
        raise RuntimeError(f"trainer-loop saw {len(algorithm.end_times)} end times for {args.rollouts} rollouts")
    return {
        "rollouts_per_s": round(args.rollouts / elapsed, 2),
        "steady_rollouts_per_s": round(steady_rate(algorithm.end_times), 2),
        "fit_seconds": round(elapsed, 3),
    }


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--transport", choices=("memory", "http"), default="memory")
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--spans", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--strategy", default="shm", help="trainer-loop execution strategy type (shm or cs)")
    args = parser.parse_args(argv)
    version = getattr(agl, "__version__", "unknown")
    if args.workload == "trainer-loop":
        result = trainer_loop(args)
    else:
        runner = {"micro-rollout": micro_rollout, "micro-dequeue-only": micro_dequeue_only}.get(
            args.workload, micro_worker
        )
        result = asyncio.run(runner(args))
    print(json.dumps({"workload": args.workload, "transport": args.transport, "version": version, **result}))
    sys.stdout.flush()
    os._exit(0)  # a trainer's or server's leftover threads must not hold the interpreter open


if __name__ == "__main__":
    main()
