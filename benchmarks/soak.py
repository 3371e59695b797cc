"""Soak: many rollouts with spans through an HTTP store; RSS and open file descriptors sampled over time.

A store server runs in its own process; `--clients` processes push `--rollouts` rollouts through it. Each rollout is
start_rollout, `--spans` spans handed to the shared span writer (`SpanWriter`, as the tracer and the LLM proxy use
it) and flushed, then update_attempt(succeeded). Clients work the way long-running runners and scripts do: every
`--tasks-per-loop` rollouts (`--concurrency` of them in flight) they open a new `LightningStoreClient` in a new
`asyncio.run`, while one span writer lives
for the whole process (so a writer that kept every store it saw, or a session per loop that is never released,
shows up as growth).

Sampled every `--interval` seconds: the server's RSS and open descriptors, and each client's (read from /proc). After
warm-up (`--warmup`, a share of the rollouts) a least-squares line of each series against the rollouts done gives the
slope; the verdict requires the projected growth over the measured part to stay within `--max-rss-growth-mb` (RSS)
and within 2 descriptors (fds). The memory backend keeps every rollout record by design (its span eviction only
frees spans), so its server RSS is reported per rollout and checked against `--memory-record-kb` instead. RSS is
judged only on runs of at least `--judge-rss-from` rollouts (shorter ones cannot tell a leak from caches warming up,
such as the server's idempotency cache, bounded by entries, bytes and a 10-minute TTL); descriptors, the writer's
counters and the stored totals are judged on every run.

    .venv/bin/python benchmarks/soak.py --backend memory --rollouts 100000
    .venv/bin/python benchmarks/soak.py --backend sqlite --rollouts 100000
    .venv/bin/python benchmarks/soak.py --backend postgres --rollouts 100000
    .venv/bin/python benchmarks/soak.py --backend all --rollouts 2000 --interval 0.5      (the short version, CI)

`--json PATH` writes each backend's server RSS growth per rollout with its verdict (benchmarks/_results.py);
`--print-json` prints each backend's whole result as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

import _servers as servers  # benchmarks/_servers.py (the script's folder is on sys.path)
from _results import Figure, add_json_argument, write_results

POSTGRES_DSN = os.environ.get("AGL_SOAK_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (0 with fewer than 3 points)."""
    if len(xs) < 3:
        return 0.0
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    if var == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var


# ------------------------------------------------------------------------------------------------------ server
def serve(
    backend_url: str, port: int, memory_limit: int, trace_memory: Optional[str] = None, in_process: bool = False
) -> None:
    """The server process: the backend behind a LightningStoreServer on 127.0.0.1:port."""
    if trace_memory:
        import _memtrace

        _memtrace.start(trace_memory)
    if in_process:
        # Durable backends keep idempotency records in their database; this keeps them in the server's memory
        # instead (as before they moved), to measure what the in-process cache costs.
        from agentlightning.store.http.server import shared_idempotency

        shared_idempotency.shared_records_for = lambda *args, **kwargs: None  # type: ignore[assignment]
    from agentlightning.store import InMemoryLightningStore, store_from_url
    from agentlightning.store.http.server.server import LightningStoreServer

    if backend_url == "memory://":
        store: Any = InMemoryLightningStore(eviction_memory_threshold=memory_limit)
    else:
        store = store_from_url(backend_url)
    asyncio.run(LightningStoreServer(store, host="127.0.0.1", port=port).run_forever())


def start_server(
    backend_url: str, memory_limit: int, trace_memory: Optional[str] = None, in_process: bool = False
) -> tuple[subprocess.Popen[bytes], str]:
    def command(port: int) -> list[str]:
        script = os.path.abspath(__file__)
        options = ["--port", str(port), "--memory-limit", str(memory_limit)]
        if trace_memory:
            options += ["--trace-memory", trace_memory]
        if in_process:
            options.append("--in-process-idempotency")
        return [sys.executable, script, "--serve", backend_url, *options]

    env = {key: value for key, value in os.environ.items() if key != "AGL_STORE_API_KEY"}
    process, port = servers.start_server(command, name=f"the store server for {backend_url}", timeout=60, env=env)
    return process, f"http://127.0.0.1:{port}"


# ------------------------------------------------------------------------------------------------------ clients
async def _rollouts(url: str, writer: Any, count: int, spans: int, worker: str, done: Any, concurrency: int) -> None:
    from agentlightning.store.http.client.client import LightningStoreClient

    client = LightningStoreClient(url)
    try:
        shares = [count // concurrency + (1 if i < count % concurrency else 0) for i in range(concurrency)]
        await asyncio.gather(*(_rollout_loop(client, writer, n, spans, worker, done) for n in shares if n))
    finally:
        await client.close()


async def _rollout_loop(client: Any, writer: Any, count: int, spans: int, worker: str, done: Any) -> None:
    from agentlightning.types import Span, TraceStatus

    for _ in range(count):
        attempted = await client.start_rollout({"soak": worker}, worker_id=worker)
        rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
        for index in range(spans):
            span = Span.from_attributes(
                attributes={"gen_ai.prompt": "x" * 200, "index": index},
                rollout_id=rollout_id,
                attempt_id=attempt_id,
                sequence_id=0,
                name="soak.call",
                status=TraceStatus(status_code="OK"),
            )
            writer.submit(client, rollout_id, attempt_id, span, group=rollout_id)
        if not await writer.flush_async(rollout_id, timeout=60):
            raise RuntimeError(f"the spans of {rollout_id} were not stored within 60 s")
        await client.update_attempt(rollout_id, attempt_id, status="succeeded")
        with done.get_lock():
            done.value += 1


def client_process(
    url: str, total: int, spans: int, per_loop: int, concurrency: int, index: int, done: Any, queue: Any
) -> None:
    import atexit

    from agentlightning.tracer.writer import SpanWriter

    writer = SpanWriter(flush_interval=0.01)
    callbacks_before = atexit._ncallbacks()  # pyright: ignore[reportAttributeAccessIssue]
    left = total
    try:
        while left > 0:
            batch = min(per_loop, left)
            asyncio.run(_rollouts(url, writer, batch, spans, f"soak-{index}", done, concurrency))
            left -= batch
    finally:
        stats = writer.stats()
        writer.close(timeout=30)
    queue.put(
        {
            "index": index,
            "written": stats.written,
            "failed": stats.failed + stats.dropped + stats.rejected,
            "stores_referenced": stats.stores,
            "atexit_growth": atexit._ncallbacks() - callbacks_before,  # pyright: ignore[reportAttributeAccessIssue]
        }
    )


# ------------------------------------------------------------------------------------------------------ one run
@dataclass
class Series:
    rollouts: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    fds: list[float] = field(default_factory=list)

    def add(self, rollouts: int, pid: int) -> None:
        try:
            rss, fds = rss_bytes(pid), open_fds(pid)
        except OSError:
            return
        self.rollouts.append(rollouts)
        self.rss.append(rss)
        self.fds.append(fds)

    def after(self, warmup_rollouts: float) -> Series:
        keep = [i for i, value in enumerate(self.rollouts) if value >= warmup_rollouts]
        return Series([self.rollouts[i] for i in keep], [self.rss[i] for i in keep], [self.fds[i] for i in keep])


def backend_url(name: str, workdir: str) -> tuple[str, Optional[str]]:
    """The store URL for a backend name, and the PostgreSQL schema to drop afterwards."""
    if name == "memory":
        return "memory://", None
    if name == "sqlite":
        return f"sqlite:///{workdir}/soak.db", None
    schema = f"soak_{uuid.uuid4().hex[:10]}"
    return f"{POSTGRES_DSN}?schema={schema}", schema


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def run(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """Soak one backend; the figures and the verdict."""
    workdir = tempfile.mkdtemp(prefix="agl-soak-")
    url_of_backend, schema = backend_url(backend, workdir)
    server, url = start_server(url_of_backend, args.memory_limit, args.trace_memory, args.in_process_idempotency)
    context = multiprocessing.get_context("spawn")
    done = context.Value("q", 0)
    queue = context.Queue()
    share = [
        args.rollouts // args.clients + (1 if i < args.rollouts % args.clients else 0) for i in range(args.clients)
    ]
    clients = [
        context.Process(
            target=client_process,
            args=(url, share[i], args.spans, args.tasks_per_loop, args.concurrency, i, done, queue),
        )
        for i in range(args.clients)
    ]
    server_series, client_series = Series(), [Series() for _ in clients]
    began = time.monotonic()
    try:
        for process in clients:
            process.start()
        while any(process.is_alive() for process in clients):
            count = done.value
            server_series.add(count, server.pid)
            for series, process in zip(client_series, clients, strict=True):
                if process.pid is not None and process.is_alive():
                    series.add(count, process.pid)
            time.sleep(args.interval)
        results = [queue.get(timeout=60) for _ in clients]
        server_series.add(done.value, server.pid)
    finally:
        for process in clients:
            process.join(10)
            if process.is_alive():
                process.kill()
        server.terminate()
        server.wait(30)
        if schema is not None:
            drop_schema(schema)
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - began
    return verdict(backend, args, done.value, elapsed, server_series, client_series, results)


def verdict(
    backend: str,
    args: argparse.Namespace,
    finished: int,
    elapsed: float,
    server_series: Series,
    client_series: list[Series],
    results: list[dict[str, Any]],
) -> dict[str, Any]:
    warmup = args.warmup * args.rollouts
    measured = max(1.0, finished - warmup)
    server = server_series.after(warmup)
    server_rss_slope = slope(server.rollouts, server.rss)  # bytes per rollout
    server_fd_slope = slope(server.rollouts, server.fds)
    clients = [series.after(warmup) for series in client_series]
    client_rss_slopes = [slope(series.rollouts, series.rss) for series in clients]
    client_fd_slopes = [slope(series.rollouts, series.fds) for series in clients]
    limit = args.max_rss_growth_mb * 1024 * 1024
    problems = []
    if finished < args.judge_rss_from:
        pass  # too short to tell a leak from caches warming up: RSS is reported, not judged
    elif backend == "memory":
        if server_rss_slope > args.memory_record_kb * 1024:
            problems.append(f"server RSS grows {server_rss_slope:.0f} B per rollout (> {args.memory_record_kb} KB)")
    elif server_rss_slope * measured > limit:
        problems.append(f"server RSS grows {server_rss_slope * measured / 2**20:.1f} MB over the measured part")
    if server_fd_slope * measured > 2:
        problems.append(f"server descriptors grow by {server_fd_slope * measured:.1f}")
    for index, (rss_slope, fd_slope) in enumerate(zip(client_rss_slopes, client_fd_slopes, strict=True)):
        if finished >= args.judge_rss_from and rss_slope * measured > limit:
            problems.append(f"client {index} RSS grows {rss_slope * measured / 2**20:.1f} MB over the measured part")
        if fd_slope * measured > 2:
            problems.append(f"client {index} descriptors grow by {fd_slope * measured:.1f}")
    written = sum(result["written"] for result in results)
    for result in results:
        if result["failed"]:
            problems.append(f"client {result['index']}: {result['failed']} spans not stored")
        if result["stores_referenced"] or result["atexit_growth"]:
            problems.append(
                f"client {result['index']}: writer still references {result['stores_referenced']} stores, "
                f"{result['atexit_growth']} exit handlers added"
            )
    if finished != args.rollouts or written != args.rollouts * args.spans:
        problems.append(f"{finished} rollouts and {written} spans stored, expected {args.rollouts} and "
                        f"{args.rollouts * args.spans}")  # fmt: skip
    return {
        "backend": backend,
        "rollouts": finished,
        "spans": written,
        "seconds": round(elapsed, 1),
        "rollouts_per_s": round(finished / elapsed, 1),
        "samples": len(server_series.rollouts),
        "server_rss_mb": [round(server_series.rss[0] / 2**20, 1), round(server_series.rss[-1] / 2**20, 1)],
        "server_rss_bytes_per_rollout_after_warmup": round(server_rss_slope, 1),
        "server_fds": [int(server_series.fds[0]), int(server_series.fds[-1])],
        "server_fds_per_1000_rollouts_after_warmup": round(server_fd_slope * 1000, 3),
        "client_rss_bytes_per_rollout_after_warmup": [round(value, 1) for value in client_rss_slopes],
        "client_fds_per_1000_rollouts_after_warmup": [round(value * 1000, 3) for value in client_fd_slopes],
        "rss_judged": finished >= args.judge_rss_from,
        "flat": not problems,
        "problems": problems,
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["memory", "sqlite", "postgres", "all"], default="memory")
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--spans", type=int, default=4, help="spans per rollout")
    parser.add_argument("--tasks-per-loop", type=int, default=50, help="rollouts per asyncio.run and client")
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts in flight per client process")
    parser.add_argument("--judge-rss-from", type=int, default=20_000, help="RSS is judged on runs this long")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=0.2, help="share of the rollouts before slopes are fitted")
    parser.add_argument("--max-rss-growth-mb", type=float, default=16.0)
    parser.add_argument("--memory-record-kb", type=float, default=8.0, help="memory backend: RSS bound per rollout")
    parser.add_argument("--memory-limit", type=int, default=64 * 1024 * 1024, help="memory backend: span eviction")
    parser.add_argument("--print-json", action="store_true", help="print one JSON line per backend")
    add_json_argument(parser)
    parser.add_argument(
        "--trace-memory",
        default=None,
        metavar="DIR",
        help="the server reports its allocations (tracemalloc, gc) to DIR/memtrace.txt (slows it down)",
    )
    parser.add_argument(
        "--in-process-idempotency",
        action="store_true",
        help="durable backends: remember idempotency answers in the server process, not in the database",
    )
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.port, args.memory_limit, args.trace_memory, args.in_process_idempotency)
        return 0
    backends = ["memory", "sqlite", "postgres"] if args.backend == "all" else [args.backend]
    one, five, fifteen = os.getloadavg()
    print(f"load average before: {one:.2f} {five:.2f} {fifteen:.2f}", flush=True)
    ok = True
    figures: list[Figure] = []
    for backend in backends:
        result = run(backend, args)
        ok = ok and result["flat"]
        figures.append(soak_figure(result, args.memory_record_kb, args.max_rss_growth_mb))
        if args.print_json:
            print(json.dumps(result), flush=True)
            continue
        print(
            f"{backend}: {result['rollouts']} rollouts, {result['spans']} spans in {result['seconds']} s "
            f"({result['rollouts_per_s']}/s); server RSS {result['server_rss_mb'][0]} -> {result['server_rss_mb'][1]} "
            f"MB, {result['server_rss_bytes_per_rollout_after_warmup']} B/rollout after warm-up; server fds "
            f"{result['server_fds'][0]} -> {result['server_fds'][1]} "
            f"({result['server_fds_per_1000_rollouts_after_warmup']} per 1000 rollouts); client RSS B/rollout "
            f"{result['client_rss_bytes_per_rollout_after_warmup']}; client fds per 1000 rollouts "
            f"{result['client_fds_per_1000_rollouts_after_warmup']}; load {result['load_average']}",
            flush=True,
        )
        print(f"{backend}: {'FLAT' if result['flat'] else 'NOT FLAT: ' + '; '.join(result['problems'])}", flush=True)
    write_results(args.json, figures)
    return 0 if ok else 1


def soak_figure(result: dict[str, Any], memory_record_kb: float, max_growth_mb: float) -> Figure:
    """The server's RSS growth per rollout after warm-up; met when everything is flat (None: too short to judge)."""
    backend = result["backend"]
    if backend == "memory":
        target = f"<= {memory_record_kb:g} KB per rollout (records kept by design), descriptors flat"
    else:
        target = f"flat: RSS < {max_growth_mb:g} MB growth after warm-up, descriptors flat, nothing lost"
    judged = result["rss_judged"]
    return Figure(
        key=f"soak.{backend}.server_rss_bytes_per_rollout",
        label=f"soak, {backend}: {result['rollouts']:,} rollouts through an HTTP store, server RSS after warm-up"
        + ("" if judged else " (too short to judge RSS)"),
        value=result["server_rss_bytes_per_rollout_after_warmup"],
        unit="bytes/rollout",
        target=target,
        met=result["flat"] if judged or not result["flat"] else None,
        higher_is_better=False,
        detail={key: result[key] for key in ("rollouts_per_s", "server_rss_mb", "server_fds", "problems")}
        | {"client_rss_bytes_per_rollout": result["client_rss_bytes_per_rollout_after_warmup"]},
    )


if __name__ == "__main__":
    sys.exit(main())
