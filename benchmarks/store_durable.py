"""Durable store benchmark (SQLite, PostgreSQL): the in-process workloads plus a multi-process contention workload.

Usage:
    python benchmarks/store_durable.py --store sqlite:///bench.db [--scale 0.1] [--processes 1,2,4] [--duration 5]
    python benchmarks/store_durable.py --store postgresql://postgres@127.0.0.1:5432/test

In-process: the workloads of `store_inprocess.py` (enqueue, enqueue+dequeue, add_span, add_many_spans,
query_spans, query_rollouts), each on a fresh database: `<path>.<n>` files for SQLite, `bench_<id>_<n>` schemas for
PostgreSQL. Everything the benchmark creates is removed at the end.

Multi-process: for each count in --processes, that many processes (fresh database, started together) run for
--duration seconds:
    spans   add_many_spans in batches of 100 on rollouts of their own (aggregate spans/s)
    pairs   enqueue_rollout then dequeue_rollout on the shared queue (aggregate pairs/s)

`--json PATH` writes the summary's figures (benchmarks/_results.py): span inserts/s with `add_many_spans` against the
target of 5,000/s, the multi-process span rates, and whether they grow from the fewest to the most processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _results import Figure, add_json_argument, write_results
from store_inprocess import Result, make_span, run

from agentlightning.store import LightningStore, store_from_url


class FreshDatabases:
    """Derives a new, empty database URL from the base URL for each use, and removes them all at the end."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.parts = urlsplit(base_url)
        self.kind = "sqlite" if self.parts.scheme == "sqlite" else "postgres"
        if self.kind == "postgres":
            query = dict(parse_qsl(self.parts.query))
            self.schema_prefix = query.pop("schema", "bench") + "_" + uuid.uuid4().hex[:8]
            self.query = query
        else:
            os.makedirs(os.path.dirname(self.parts.path[1:]) or ".", exist_ok=True)
        self.created: list[str] = []

    def new_url(self) -> str:
        index = len(self.created)
        if self.kind == "sqlite":
            path = f"{self.parts.path[1:]}.{index}"
            self._remove_sqlite(path)
            self.created.append(path)
            return f"sqlite:///{path}"
        schema = f"{self.schema_prefix}_{index}"
        self.created.append(schema)
        query = urlencode({**self.query, "schema": schema})
        return urlunsplit((self.parts.scheme, self.parts.netloc, self.parts.path, query, ""))

    def open(self, _url: str) -> LightningStore:
        return store_from_url(self.new_url())

    @staticmethod
    def _remove_sqlite(path: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)

    def cleanup(self) -> None:
        if self.kind == "sqlite":
            for path in self.created:
                self._remove_sqlite(path)
            return
        import psycopg

        dsn = urlunsplit((self.parts.scheme, self.parts.netloc, self.parts.path, urlencode(self.query), ""))
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in self.created:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # type: ignore[arg-type]


@contextmanager
def fresh_databases(base_url: str) -> Iterator[FreshDatabases]:
    databases = FreshDatabases(base_url)
    try:
        yield databases
    finally:
        databases.cleanup()


# ------------------------------------------------------------------------------------------------- worker process
async def worker(url: str, workload: str, start_at: float, duration: float, name: str) -> dict[str, float]:
    store = store_from_url(url)
    if workload == "spans":
        started = [await store.start_rollout({"worker": name, "i": i}) for i in range(10)]
    await asyncio.sleep(max(start_at - time.time(), 0.0))
    items = 0
    batch = 0
    begin = time.perf_counter()
    while time.perf_counter() - begin < duration:
        if workload == "spans":
            target = started[batch % len(started)]
            batch += 1
            spans = [make_span(target.rollout_id, target.attempt.attempt_id, batch * 100 + k) for k in range(100)]
            items += len(await store.add_many_spans(spans))
        else:
            await store.enqueue_rollout({"worker": name})
            if await store.dequeue_rollout(worker_id=name) is not None:
                items += 1
    elapsed = time.perf_counter() - begin
    await store.close()
    return {"items": items, "seconds": elapsed}


def run_processes(url: str, workload: str, processes: int, duration: float) -> float:
    """Aggregate items/s of `processes` workers started together on one database."""
    store_from_url(url)  # create the schema before the workers race for it
    start_at = time.time() + 3.0
    args = ["--worker", workload, "--url", url, "--start-at", str(start_at), "--duration", str(duration)]
    children = [
        subprocess.Popen([sys.executable, __file__, *args, "--name", f"w{i}"], stdout=subprocess.PIPE, text=True)
        for i in range(processes)
    ]
    results = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"worker failed with exit code {child.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return sum(r["items"] for r in results) / max(r["seconds"] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default="sqlite:///agl-bench.db", help="sqlite:///path or postgresql://... URL")
    parser.add_argument("--scale", type=float, default=0.1, help="multiply the in-process operation counts")
    parser.add_argument("--processes", default="1,2,4", help="process counts of the multi-process workload")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds each multi-process run lasts")
    parser.add_argument("--skip-inprocess", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.url, args.worker, args.start_at, args.duration, args.name))))
        return

    print(f"store: {args.store}  python: {sys.version.split()[0]}  cpus: {os.cpu_count()}")
    results: list[Result] = []
    rates: dict[str, list[float]] = {}
    counts = [int(value) for value in args.processes.split(",") if value]
    with fresh_databases(args.store) as databases:
        if not args.skip_inprocess:
            results = asyncio.run(run(args.store, args.scale, open_store=databases.open))
            print(f"{'workload':<16}{'ops':>9}{'ops/s':>11}{'items/s':>11}{'p50 us':>9}{'p99 us':>9}")
            for r in results:
                print(
                    f"{r.workload:<16}{r.operations:>9}{r.ops_per_second:>11,.0f}{r.items_per_second:>11,.0f}"
                    f"{r.p50_us:>9.1f}{r.p99_us:>9.1f}"
                )
        if counts:
            print(f"\nmulti-process ({args.duration:g} s per run): aggregate items/s")
            print(f"{'workload':<10}" + "".join(f"{f'{n} proc':>12}" for n in counts))
            for workload in ("spans", "pairs"):
                rates[workload] = [run_processes(databases.new_url(), workload, n, args.duration) for n in counts]
                print(f"{workload:<10}" + "".join(f"{rate:>12,.0f}" for rate in rates[workload]))
    kind = "sqlite" if args.store.startswith("sqlite") else "postgres"
    write_results(args.json, figures(kind, results, counts, rates), extra={"scale": args.scale})


def figures(kind: str, results: list[Result], counts: list[int], rates: dict[str, list[float]]) -> list[Figure]:
    """Span inserts/s with batching (target: 5,000/s), the multi-process span rates and their growth."""
    name = "SQLite" if kind == "sqlite" else "PostgreSQL"
    found: list[Figure] = []
    batched = next((r for r in results if r.workload == "add_many_spans"), None)
    if batched is not None:
        found.append(
            Figure(
                key=f"store.{kind}.add_many_spans_per_s",
                label=f"{name}: span inserts with `add_many_spans` (one process)",
                value=round(batched.items_per_second),
                unit="spans/s",
                target=">= 5,000 spans/s",
                met=batched.items_per_second >= 5_000,
                detail={"workloads": {r.workload: asdict(r) for r in results}},
            )
        )
    spans = rates.get("spans", [])
    for count, rate in zip(counts, spans, strict=True):
        found.append(
            Figure(
                key=f"store.{kind}.processes_{count}.spans_per_s",
                label=f"{name}: span inserts, {count} writer process{'es' if count > 1 else ''}",
                value=round(rate),
                unit="spans/s",
                detail={"pairs_per_s": round(rates["pairs"][counts.index(count)])} if "pairs" in rates else {},
            )
        )
    if len(spans) > 1 and spans[0] > 0:
        growth = spans[-1] / spans[0]
        found.append(
            Figure(
                key=f"store.{kind}.processes_growth",
                label=f"{name}: span throughput, {counts[-1]} writer processes over {counts[0]}",
                value=round(growth, 2),
                unit="x",
                target="> 1 (grows with writer processes)" if kind == "postgres" else None,
                met=growth > 1 if kind == "postgres" else None,
                detail={"processes": counts, "spans_per_s": [round(rate) for rate in spans]},
            )
        )
    return found


if __name__ == "__main__":
    main()
