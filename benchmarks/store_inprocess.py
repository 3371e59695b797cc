"""In-process LightningStore benchmark: operation throughput and per-call latency.

Usage:
    python benchmarks/store_inprocess.py [--store memory://] [--scale 1.0] [--json out.json]

`--json` writes the figures behind the summary (memory backend: add_span/s, add_many_spans spans/s, pairs/s against
their targets) with every workload's row in `detail`, through benchmarks/_results.py.

Workloads (each on a fresh store):
    enqueue            enqueue_rollout, one call per rollout
    enqueue+dequeue    enqueue_rollout followed by dequeue_rollout (the target counts pairs)
    add_span           add_span, one call per span, spread over running rollouts
    add_many_spans     add_many_spans in batches of 100 (throughput in spans/s)
    query_spans        query_spans of one rollout holding 20 spans
    query_rollouts     query_rollouts(status_in=["running"]) over 1,000 rollouts, limit 50
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _results import Figure, add_json_argument, write_results

from agentlightning.store import LightningStore, store_from_url
from agentlightning.types import EnqueueRolloutRequest, Span


@dataclass
class Result:
    workload: str
    operations: int
    items: int
    seconds: float
    ops_per_second: float
    items_per_second: float
    p50_us: float
    p99_us: float


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(round(fraction * (len(ordered) - 1)), len(ordered) - 1)
    return ordered[index]


def make_span(rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
    now = time.time()
    return Span.from_attributes(
        attributes={"gen_ai.request.model": "smol", "gen_ai.usage.prompt_tokens": 42, "reward": 0.5},
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        name="openai.chat.completion",
        start_time=now,
        end_time=now + 0.01,
    )


async def timed(name: str, count: int, items_per_op: int, op: Callable[[int], Awaitable[object]]) -> Result:
    latencies: list[float] = []
    gc.collect()
    start = time.perf_counter()
    for index in range(count):
        t0 = time.perf_counter()
        await op(index)
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    return Result(
        workload=name,
        operations=count,
        items=count * items_per_op,
        seconds=elapsed,
        ops_per_second=count / elapsed,
        items_per_second=count * items_per_op / elapsed,
        p50_us=_percentile(latencies, 0.5) * 1e6,
        p99_us=_percentile(latencies, 0.99) * 1e6,
    )


async def running_rollouts(store: LightningStore, count: int) -> list[tuple[str, str]]:
    started = []
    for index in range(count):
        rollout = await store.start_rollout({"index": index})
        started.append((rollout.rollout_id, rollout.attempt.attempt_id))
    return started


async def run(url: str, scale: float, open_store: Callable[[str], LightningStore] = store_from_url) -> list[Result]:
    """Run every workload, each on a store from `open_store(url)` (durable benchmarks pass a fresh one each time)."""

    def n(base: int) -> int:
        return max(int(base * scale), 10)

    results: list[Result] = []

    store = open_store(url)
    results.append(await timed("enqueue", n(20_000), 1, lambda i: store.enqueue_rollout({"i": i})))
    await store.close()

    store = open_store(url)

    async def pair(i: int) -> None:
        await store.enqueue_rollout({"i": i})
        await store.dequeue_rollout(worker_id="bench")

    results.append(await timed("enqueue+dequeue", n(20_000), 1, pair))
    await store.close()

    store = open_store(url)
    targets = await running_rollouts(store, 100)
    spans = [make_span(*targets[i % 100], i // 100 + 1) for i in range(n(50_000))]
    results.append(await timed("add_span", len(spans), 1, lambda i: store.add_span(spans[i])))
    await store.close()

    store = open_store(url)
    targets = await running_rollouts(store, 100)
    batches = [[make_span(*targets[(b * 100 + k) % 100], b + 1) for k in range(100)] for b in range(n(2_000))]
    results.append(await timed("add_many_spans", len(batches), 100, lambda i: store.add_many_spans(batches[i])))
    await store.close()

    store = open_store(url)
    targets = await running_rollouts(store, 50)
    await store.add_many_spans([make_span(rid, aid, seq) for rid, aid in targets for seq in range(1, 21)])
    results.append(await timed("query_spans", n(20_000), 20, lambda i: store.query_spans(targets[i % 50][0])))
    await store.close()

    store = open_store(url)
    await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(1_000)])
    claimed = await store.dequeue_many_rollouts(limit=500)
    await store.add_many_spans([make_span(r.rollout_id, r.attempt.attempt_id, 1) for r in claimed])
    results.append(
        await timed("query_rollouts", n(2_000), 50, lambda i: store.query_rollouts(status_in=["running"], limit=50))
    )
    await store.close()
    return results


# Targets of the in-process memory store: (workload, figure key suffix, label, unit, threshold).
MEMORY_TARGETS = [
    ("add_span", "add_span_per_s", "memory store: `add_span`", "spans/s", 25_000),
    ("add_many_spans", "add_many_spans_per_s", "memory store: spans through `add_many_spans`", "spans/s", 50_000),
    ("enqueue+dequeue", "enqueue_dequeue_pairs_per_s", "memory store: enqueue + dequeue pairs", "pairs/s", 10_000),
]


def figures(url: str, results: list[Result]) -> list[Figure]:
    """The summary figures of a run: items/s of the target workloads, each with every workload's row as detail."""
    scheme = url.split(":", 1)[0]
    by_name = {r.workload: r for r in results}
    chosen = MEMORY_TARGETS if scheme == "memory" else []
    rows = {r.workload: asdict(r) for r in results}
    return [
        Figure(
            key=f"store.{scheme}.{suffix}",
            label=label,
            value=round(by_name[workload].items_per_second),
            unit=unit,
            target=f">= {threshold:,} {unit}",
            met=by_name[workload].items_per_second >= threshold,
            detail={"p50_us": by_name[workload].p50_us, "p99_us": by_name[workload].p99_us, "workloads": rows},
        )
        for workload, suffix, label, unit, threshold in chosen
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default="memory://", help="store URL")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the operation counts")
    add_json_argument(parser)
    args = parser.parse_args()
    results = asyncio.run(run(args.store, args.scale))
    print(f"store: {args.store}  python: {sys.version.split()[0]}  cpus: {os.cpu_count()}")
    print(f"{'workload':<16}{'ops':>9}{'ops/s':>11}{'items/s':>11}{'p50 us':>9}{'p99 us':>9}")
    for r in results:
        print(
            f"{r.workload:<16}{r.operations:>9}{r.ops_per_second:>11,.0f}{r.items_per_second:>11,.0f}"
            f"{r.p50_us:>9.1f}{r.p99_us:>9.1f}"
        )
    write_results(args.json, figures(args.store, results), extra={"scale": args.scale})


if __name__ == "__main__":
    main()
