"""Cross-process wake-up latency of `wait_for_rollouts` on the PostgreSQL store.

Process A (this script) and process B (a child) each open a `PostgresLightningStore` on the same fresh schema. Per
trial: A starts a rollout, B starts `wait_for_rollouts` on it and says so, A waits a random 0-`--jitter` seconds (so
that the finish lands anywhere within B's poll cycle) and finishes the rollout with `update_attempt(succeeded)`.
The latency is from the start of A's `update_attempt` call to the return of B's `wait_for_rollouts` (both read the
system-wide monotonic clock), so it includes A's write itself; A's write time is printed too.

    .venv/bin/python benchmarks/pg_wakeup.py --trials 100            # LISTEN/NOTIFY (the default)
    .venv/bin/python benchmarks/pg_wakeup.py --trials 100 --poll     # the old polling (listen=False, 0.5 s)
    .venv/bin/python benchmarks/pg_wakeup.py --trials 100 --compare-poll --json out.json   # both, same run

`--json PATH` writes the wake-up p50 and max (benchmarks/_results.py); with `--compare-poll` the polling mode is
measured after LISTEN/NOTIFY in the same run and is the figures' peer.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, Peer, add_json_argument, write_results

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _waiter_main(dsn: str, schema: str, listen: bool, conn: Any) -> None:
    """Process B: wait for each rollout id received on `conn`; send back when the wait returned."""

    async def main() -> None:
        from agentlightning.store.postgres.store import PostgresLightningStore

        store = PostgresLightningStore(dsn, schema=schema, pool_size=2, listen=listen)
        await store.open()
        if listen:
            await asyncio.to_thread(store._postgres.listener.wait_live, 30.0)  # pyright: ignore[reportPrivateUsage]
        conn.send(("ready", store.listening))
        while True:
            rollout_id = await asyncio.to_thread(conn.recv)
            if rollout_id is None:
                break
            waiting = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[rollout_id], timeout=30.0))
            await asyncio.sleep(0.01)  # the first read is done and the waiter sleeps
            conn.send(("armed", None))
            finished = await waiting
            returned = time.monotonic()
            conn.send(("finished", (returned, len(finished))))
        await store.close()

    asyncio.run(main())


async def _run(args: argparse.Namespace, schema: str, poll: bool) -> dict[str, Any]:
    from agentlightning.store.postgres.store import PostgresLightningStore

    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=_waiter_main, args=(args.dsn, schema, not poll, theirs), daemon=True)
    store = PostgresLightningStore(args.dsn, schema=schema, pool_size=2, listen=False)
    await store.open()
    child.start()
    kind, listening = await asyncio.to_thread(ours.recv)
    assert kind == "ready"
    latencies: list[float] = []
    writes: list[float] = []
    rng = random.Random(args.seed)
    try:
        for _ in range(args.warmup + args.trials):
            rollout = await store.start_rollout({"trial": True})
            ours.send(rollout.rollout_id)
            kind, _ = await asyncio.to_thread(ours.recv)
            assert kind == "armed"
            await asyncio.sleep(rng.uniform(0.0, args.jitter))
            started = time.monotonic()
            await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
            written = time.monotonic()
            kind, (returned, count) = await asyncio.to_thread(ours.recv)
            assert kind == "finished" and count == 1, "the waiter timed out"
            latencies.append((returned - started) * 1000)
            writes.append((written - started) * 1000)
        ours.send(None)
        await asyncio.to_thread(child.join, 30)
    finally:
        if child.is_alive():
            child.kill()
        await store.close()
    latencies, writes = latencies[args.warmup :], writes[args.warmup :]
    return {"latencies": latencies, "writes": writes, "listening": listening}


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # type: ignore[arg-type]


def measure(args: argparse.Namespace, poll: bool) -> dict[str, Any]:
    """One mode's trials on a fresh schema (dropped afterwards); prints and returns its figures."""
    schema = f"agl_bench_wakeup_{uuid.uuid4().hex[:12]}"
    try:
        result = asyncio.run(_run(args, schema, poll))
    finally:
        _drop_schema(args.dsn, schema)
    latencies, writes = result["latencies"], result["writes"]
    mode = "poll (listen=False, poll interval 0.5 s)" if poll else "LISTEN/NOTIFY"
    print(f"mode={mode} waiter_listening={result['listening']} trials={len(latencies)} jitter={args.jitter}")
    figures = {
        "p50_ms": _percentile(latencies, 0.50),
        "p99_ms": _percentile(latencies, 0.99),
        "mean_ms": statistics.fmean(latencies),
        "max_ms": max(latencies),
        "write_p50_ms": _percentile(writes, 0.50),
        "trials_ms": [round(value, 2) for value in latencies],
    }
    print(
        f"wake-up latency ms: p50 {figures['p50_ms']:.1f}  p99 {figures['p99_ms']:.1f}  "
        f"mean {figures['mean_ms']:.1f}  max {figures['max_ms']:.1f}"
    )
    print(f"A's update_attempt ms (included above): p50 {figures['write_p50_ms']:.1f}")
    return figures


def wakeup_figures(poll: bool, ours: dict[str, Any], polling: Optional[dict[str, Any]], trials: int) -> list[Figure]:
    """p50 (target: within milliseconds, < 50 ms) and max of the wake-up, polling as the peer when measured."""
    name = "polling" if poll else "notify"
    found = []
    for stat, label in (("p50_ms", "p50"), ("max_ms", "max")):
        met = ours[stat] < 50 if stat == "p50_ms" and not poll else None
        found.append(
            Figure(
                key=f"store.postgres.wakeup_{name}_{stat}",
                label=f"PostgreSQL: a rollout finished in one process wakes `wait_for_rollouts` in another, {label}",
                value=round(ours[stat], 1),
                unit="ms",
                target="< 50 ms (including the finishing write)" if stat == "p50_ms" and not poll else None,
                met=met,
                higher_is_better=False,
                peer=Peer("polling every 0.5 s", round(polling[stat], 1), list(polling.get("trials_ms", [])))
                if polling
                else None,
                detail={"trials": trials, "write_p50_ms": round(ours["write_p50_ms"], 1), "rounds": "each trial's ms"},
                rounds=list(ours.get("trials_ms", [])),
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("AGL_TEST_POSTGRES_DSN", DEFAULT_DSN))
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=3, help="trials run first and not counted")
    parser.add_argument("--jitter", type=float, default=0.5, help="A waits a random 0..JITTER s before finishing")
    parser.add_argument("--poll", action="store_true", help="force the old polling mode (listen=False)")
    parser.add_argument("--compare-poll", action="store_true", help="also measure polling, as the peer")
    parser.add_argument("--seed", type=int, default=0)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.poll and args.compare_poll:
        parser.error("--poll and --compare-poll exclude each other")
    print(f"load average before: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    ours = measure(args, args.poll)
    polling = measure(args, True) if args.compare_poll else None
    print(f"load average after: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    write_results(args.json, wakeup_figures(args.poll, ours, polling, args.trials))


if __name__ == "__main__":
    main()
