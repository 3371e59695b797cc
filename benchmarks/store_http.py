"""Throughput and latency of the store over HTTP.

N client processes each loop: enqueue -> dequeue -> 4 spans -> update_attempt(succeeded), against one server
(started here in its own process, or an existing one with --url). Reports rollouts/s, and per-request p50/p99 as
measured by the clients (perf_counter around each call) and by the server (each answer's `Server-Timing: app;dur=`
header: receipt of the request to the start of its answer, read per request by the client). Both are measured per
request, so the server's figure of a request can never exceed the client's. Also reports the CPU time per rollout
of the server (with its worker processes), of the PostgreSQL processes on the machine, and of the clients: unlike
rollouts/s, these hardly depend on what else the machine runs.

    .venv/bin/python benchmarks/store_http.py --clients 16 --seconds 20
    .venv/bin/python benchmarks/store_http.py --clients 16 --seconds 20 --spans batch
    .venv/bin/python benchmarks/store_http.py --clients 16 --seconds 20 --server-workers 2 \
        --backend postgresql://postgres@127.0.0.1:5432/test

`--client aiohttp` has the clients speak through aiohttp instead of the project's keep-alive HTTP/1.1 client
(`store/http/client/lite.py`), the library it replaces, and `--client httpx` through httpx
(`benchmarks/_httpx_session.py`): compared on the same run.

`--routing starlette` has the server started here route the store operations through Starlette's router inside
the FastAPI app (routes registered on it) instead of the store's own dispatcher in front of it (the default,
`--routing dispatcher`; see `store/http/server/dispatch.py`), through the private AGL_STORE_ROUTING variable of the
server process; compared side by side on the same machine:

    .venv/bin/python benchmarks/store_http.py --clients 16 --seconds 20 --json results/dispatcher.json
    .venv/bin/python benchmarks/store_http.py --clients 16 --seconds 20 --routing starlette \
        --json results/starlette.json

`--client-per-task` runs the short-lived-client workloads of `benchmarks/store_http_per_task.py` instead (a fresh
client and `asyncio.run` per task; see that module).

`--json PATH` writes the figures (benchmarks/_results.py), keyed by the configuration: `store.http.<backend>.<spans>`
(plus `.aiohttp`, `.httpx`, `.starlette`, `.workers<N>` for the alternatives), `store.http.per_task.<task>`,
`store.http.first_request_ms`.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from typing import Any, Optional

import _servers as servers  # benchmarks/_servers.py (the script's folder is on sys.path)
from _results import Figure, add_json_argument, load_averages_text, write_results

# Rollouts/s targets of the 16-client workload, by (backend, spans).
ROLLOUT_TARGETS = {("memory", "single"): 250, ("postgres", "single"): 200, ("postgres", "batch"): 200}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _client_loop(url: str, seconds: float, span_mode: str, worker: str) -> dict[str, Any]:
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.types import Span, TraceStatus

    client = LightningStoreClient(url)
    if os.environ.get("_AGL_HTTP_CLIENT") == "httpx":  # imported only then: the other sides never load httpx
        from _httpx_session import use_httpx

        use_httpx(client)
    client_ms: list[float] = []
    server_ms: list[float] = []
    _record_server_timing(client, server_ms)

    async def timed(call: Any) -> Any:
        started = time.perf_counter()
        result = await call
        client_ms.append((time.perf_counter() - started) * 1000)
        return result

    rollouts = 0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime
    began = time.monotonic()
    deadline = began + seconds
    while time.monotonic() < deadline:
        await timed(client.enqueue_rollout({"question": "1+1", "worker": worker}))
        claimed = await timed(client.dequeue_rollout(worker_id=worker))
        if claimed is None:
            continue
        spans = [
            Span.from_attributes(
                attributes={"gen_ai.prompt": "x" * 200, "index": i},
                rollout_id=claimed.rollout_id,
                attempt_id=claimed.attempt.attempt_id,
                sequence_id=i + 1,
                name="llm.call",
                status=TraceStatus(status_code="OK"),
            )
            for i in range(4)
        ]
        if span_mode == "batch":
            await timed(client.add_many_spans(spans))
        else:
            for span in spans:
                await timed(client.add_span(span))
        await timed(client.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded"))
        rollouts += 1
    duration = time.monotonic() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    await client.close()
    return {
        "rollouts": rollouts,
        "client_ms": client_ms,
        "server_ms": server_ms,
        "duration": duration,
        "cpu_seconds": usage.ru_utime + usage.ru_stime - cpu_before,
    }


def _record_server_timing(client: Any, sink: list[float]) -> None:
    """Make `client` append each answer's `Server-Timing: app;dur=<ms>` value to `sink`."""
    transport = client._transport
    make_session = transport._new_session

    def record(header: str) -> None:
        for part in header.split(";"):
            if part.startswith("dur="):
                sink.append(float(part[4:]))

    def new_session() -> Any:
        session = make_session()
        send = getattr(session, "send", None)
        if send is not None:  # the store client's own HTTP/1.1 session (http:// servers), or httpx's

            async def timed_send(*args: Any, **kwargs: Any) -> Any:
                response = await send(*args, **kwargs)
                record(response.headers.get("server-timing", ""))
                return response

            session.send = timed_send
            return session
        import aiohttp  # https:// servers go through aiohttp

        async def on_request_end(_session: Any, _context: Any, params: Any) -> None:
            record(params.response.headers.get("server-timing", ""))

        trace = aiohttp.TraceConfig()
        trace.on_request_end.append(on_request_end)
        trace.freeze()
        session._trace_configs.append(trace)
        return session

    transport._new_session = new_session
    transport._pool._factory = new_session


def _client_process(url: str, seconds: float, span_mode: str, index: int, queue: Any, start: Any) -> None:
    start.wait()
    try:
        import uvloop

        result = uvloop.run(_client_loop(url, seconds, span_mode, f"worker-{index}"))
    except ImportError:
        result = asyncio.run(_client_loop(url, seconds, span_mode, f"worker-{index}"))
    queue.put(result)


def _start_server(backend: str, workers: int = 1, routing: str = "dispatcher") -> tuple[subprocess.Popen[bytes], str]:
    def command(port: int) -> list[str]:
        command = [sys.executable, "-m", "agentlightning", "store", "--backend", backend, "--port", str(port)]
        return command + ["--log-level", "warning"] + (["--workers", str(workers)] if workers > 1 else [])

    env = {key: value for key, value in os.environ.items() if key not in ("AGL_STORE_API_KEY", "AGL_STORE_ROUTING")}
    env["AGL_STORE_ROUTING"] = routing  # read by the server's app factory (private, for this measurement only)
    process, port = servers.start_server(
        command, name="the store server", timeout=30, env=env, stderr=subprocess.DEVNULL
    )
    return process, f"http://127.0.0.1:{port}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--spans", choices=["single", "batch"], default="single", help="add_span x4 or add_many_spans")
    parser.add_argument("--backend", default="memory://", help="store URL for the server started here")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--server-workers", type=int, default=1, help="`agl store --workers N` for the server")
    parser.add_argument("--client-per-task", action="store_true", help="short-lived clients (store_http_per_task)")
    parser.add_argument("--task", choices=["full", "claim-update", "claim"], default="full")
    parser.add_argument("--processes", type=int, default=16, help="with --client-per-task")
    parser.add_argument("--prefill", type=int, default=30_000, help="rollouts queued before claim variants")
    parser.add_argument("--first-request", action="store_true", help="time a fresh process's first request")
    parser.add_argument("--runs", type=int, default=10, help="fresh processes for --first-request")
    parser.add_argument(
        "--client", choices=["lite", "aiohttp", "httpx"], default="lite", help="the clients' HTTP library"
    )
    parser.add_argument(
        "--routing",
        choices=["dispatcher", "starlette"],
        default="dispatcher",
        help="how the server started here routes store operations: its own dispatcher or Starlette's router",
    )
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.url is not None and args.routing != "dispatcher":
        parser.error("--routing applies to the server started here, not to --url")
    if args.client != "lite":
        os.environ["_AGL_HTTP_CLIENT"] = args.client  # inherited by the client processes
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")

    server = None
    url = args.url
    if url is None:
        server, url = _start_server(args.backend, args.server_workers, args.routing)
    if args.client_per_task or args.first_request:
        try:
            return _per_task(args, url)
        finally:
            if server is not None:
                server.terminate()
                server.wait(30)
    try:
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        start = context.Event()
        processes = [
            context.Process(target=_client_process, args=(url, args.seconds, args.spans, i, queue, start))
            for i in range(args.clients)
        ]
        for process in processes:
            process.start()
        time.sleep(2.0)  # let every client import before the clock starts
        server_cpu_before = _tree_cpu_seconds(server.pid) if server is not None else None
        database_cpu_before = _database_cpu_seconds()
        start.set()
        results = [queue.get(timeout=args.seconds + 120) for _ in processes]
        server_cpu = (
            _tree_cpu_seconds(server.pid) - server_cpu_before
            if server is not None and server_cpu_before is not None
            else None
        )
        database_cpu = _database_cpu_seconds() - database_cpu_before
        elapsed = max(result["duration"] for result in results)
        for process in processes:
            process.join(30)
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
    rollouts = sum(result["rollouts"] for result in results)
    client_ms = [value for result in results for value in result["client_ms"]]
    server_ms = [value for result in results for value in result["server_ms"]]
    requests_per_rollout = 3 + (4 if args.spans == "single" else 1)
    print(
        f"clients={args.clients} seconds={args.seconds} spans={args.spans} backend={args.backend} "
        f"server_workers={args.server_workers} client={args.client} routing={args.routing}"
    )
    print(f"rollouts: {rollouts} in {elapsed:.1f} s = {rollouts / elapsed:.1f} rollouts/s")
    print(
        f"requests: {len(client_ms)} ({requests_per_rollout} per rollout) = {len(client_ms) / elapsed:.0f} requests/s"
    )
    print(f"client latency ms: p50 {_percentile(client_ms, 0.5):.2f}  p99 {_percentile(client_ms, 0.99):.2f}")
    print(
        f"server latency ms (Server-Timing of {len(server_ms)} requests): "
        f"p50 {_percentile(server_ms, 0.5):.2f}  p99 {_percentile(server_ms, 0.99):.2f}"
    )
    client_cpu = sum(result["cpu_seconds"] for result in results)
    on_postgres = args.backend.startswith("postgres") or args.url is not None
    parts = [("server", server_cpu), ("PostgreSQL", database_cpu if on_postgres else None), ("clients", client_cpu)]
    shown = [(name, seconds) for name, seconds in parts if seconds is not None]
    per_rollout = "  ".join(f"{name} {1000 * seconds / max(rollouts, 1):.2f}" for name, seconds in shown)
    total = sum(seconds for _, seconds in shown)
    print(f"CPU ms per rollout: {per_rollout}  total {1000 * total / max(rollouts, 1):.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    measured = {
        "rollouts_per_s": rollouts / elapsed,
        "requests_per_s": len(client_ms) / elapsed,
        "client_p50_ms": _percentile(client_ms, 0.5),
        "client_p99_ms": _percentile(client_ms, 0.99),
        "server_p50_ms": _percentile(server_ms, 0.5),
        "server_p99_ms": _percentile(server_ms, 0.99),
        "cpu_ms_per_rollout": {name: 1000 * seconds / max(rollouts, 1) for name, seconds in shown},
        "cpu_ms_per_rollout_total": 1000 * total / max(rollouts, 1),
    }
    write_results(args.json, rollout_figures(args, measured), extra={"figures": measured})
    return 0


def _backend_kind(url: str) -> str:
    return "postgres" if url.startswith("postgres") else url.split(":", 1)[0]


def _variant(args: argparse.Namespace) -> str:
    """The key suffix of the alternatives (the project's own client has none)."""
    parts = [args.client] if args.client != "lite" else []
    parts += [args.routing] if args.routing != "dispatcher" else []
    parts += [f"workers{args.server_workers}"] if args.server_workers > 1 else []
    return "".join(f".{part}" for part in parts)


def rollout_figures(args: argparse.Namespace, measured: dict[str, Any]) -> list[Figure]:
    """Rollouts/s (against its target where it has one), client p99, server p50 and CPU per rollout."""
    backend = "url" if args.url else _backend_kind(args.backend)
    prefix = f"store.http.{backend}.{args.spans}{_variant(args)}"
    what = f"HTTP store, {args.clients} clients, {backend} backend, {args.spans} spans" + (
        f" ({_variant(args)[1:].replace('.', ', ')})" if _variant(args) else ""
    )
    target = ROLLOUT_TARGETS.get((backend, args.spans)) if not _variant(args) else None
    rate = measured["rollouts_per_s"]
    server_p50 = measured["server_p50_ms"]
    server_target = backend == "memory" and not _variant(args)
    return [
        Figure(
            key=f"{prefix}.rollouts_per_s",
            label=what,
            value=round(rate, 1),
            unit="rollouts/s",
            target=f">= {target} rollouts/s" if target else None,
            met=rate >= target if target else None,
            detail={"seconds": args.seconds, "requests_per_s": round(measured["requests_per_s"])},
        ),
        Figure(
            key=f"{prefix}.client_p99_ms",
            label=f"{what}: client p99 per request",
            value=round(measured["client_p99_ms"], 2),
            unit="ms",
            higher_is_better=False,
            detail={"client_p50_ms": round(measured["client_p50_ms"], 2)},
        ),
        Figure(
            key=f"{prefix}.server_p50_ms",
            label=f"{what}: server p50 per request (Server-Timing)",
            value=round(server_p50, 2),
            unit="ms",
            target="< 5 ms" if server_target else None,
            met=server_p50 < 5 if server_target else None,
            higher_is_better=False,
            detail={"server_p99_ms": round(measured["server_p99_ms"], 2)},
        ),
        Figure(
            key=f"{prefix}.cpu_ms_per_rollout",
            label=f"{what}: CPU per rollout (server, database, clients)",
            value=round(measured["cpu_ms_per_rollout_total"], 2),
            unit="ms",
            higher_is_better=False,
            detail={name: round(value, 2) for name, value in measured["cpu_ms_per_rollout"].items()},
        ),
    ]


def per_task_figures(args: argparse.Namespace, result: dict[str, Any]) -> list[Figure]:
    """A fresh client per task (rate and request p99) or a fresh process's first request."""
    variant = _variant(args)
    alternative = f" ({variant[1:].replace('.', ', ')})" if variant else ""
    if args.first_request:
        # Import plus first request: `import agentlightning` resolves its names lazily, so the imports a client needs
        # happen at its first request; the sum is what a fresh process pays, wherever they happen. The target is the
        # import's own (< 300 ms) plus 50 ms for the request.
        total = result["total_ms"]
        return [
            Figure(
                key=f"store.http.first_request_ms{variant}",
                label=f"fresh process: `import agentlightning` plus its first store request{alternative}, median",
                value=round(total, 1),
                unit="ms",
                target="< 350 ms" if not variant else None,
                met=total < 350 if not variant else None,
                higher_is_better=False,
                detail={k: result[k] for k in ("runs", "import_ms", "first_ms", "first_max_ms", "second_ms")},
                rounds=list(result.get("rounds_total_ms", [])),
            )
        ]
    full = args.task == "full" and not variant
    what = f"short-lived clients ({args.processes} processes, a client per task), task {args.task}{alternative}"
    return [
        Figure(
            key=f"store.http.per_task.{args.task}{variant}.tasks_per_s",
            label=what,
            value=round(result["tasks_per_s"], 1),
            unit="tasks/s",
            target=">= 120 tasks/s" if full else None,
            met=result["tasks_per_s"] >= 120 if full else None,
            detail={"tasks": result["tasks"], "seconds": args.seconds, "task_p50_ms": result["task_p50_ms"]},
        ),
        Figure(
            key=f"store.http.per_task.{args.task}{variant}.request_p99_ms",
            label=f"{what}: p99 per request",
            value=round(result["p99_ms"], 1),
            unit="ms",
            target="< 300 ms" if full else None,
            met=result["p99_ms"] < 300 if full else None,
            higher_is_better=False,
            detail={"p50_ms": result["p50_ms"], "max_ms": result["max_ms"], "over_1s": result["over_1s"]},
        ),
    ]


def _proc_stat(pid: int) -> tuple[str, int, float]:
    """(command name, parent pid, user+system CPU seconds) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as file:
        text = file.read()
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _all_processes() -> dict[int, tuple[str, int, float]]:
    stats: dict[int, tuple[str, int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stats[int(entry)] = _proc_stat(int(entry))
            except (OSError, ValueError):
                continue
    return stats


def _tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by a process and its descendants (the server and its `--workers`)."""
    stats = _all_processes()
    tree, total = {root}, 0.0
    for pid in sorted(stats):  # children have higher pids than their parents here
        if pid == root or stats[pid][1] in tree:
            tree.add(pid)
            total += stats[pid][2]
    return total


def _database_cpu_seconds() -> float:
    """CPU seconds used so far by the PostgreSQL processes on this machine (0 when none run)."""
    return sum(cpu for name, _, cpu in _all_processes().values() if name.startswith("postgres"))


def _per_task(args: argparse.Namespace, url: str) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import store_http_per_task as per_task

    if args.first_request:
        result = per_task.first_request(url, args.runs)
        print(
            f"fresh process ({result['runs']} runs, medians): import agentlightning {result['import_ms']:.0f} ms; "
            f"first request {result['first_ms']:.1f} ms (max {result['first_max_ms']:.1f}); "
            f"second request {result['second_ms']:.1f} ms; import plus first request {result['total_ms']:.1f} ms"
        )
    else:
        result = per_task.run_tasks(url, args.task, args.processes, args.seconds, args.prefill)
        print(
            f"client per task: task={args.task} processes={args.processes} seconds={args.seconds} "
            f"backend={args.backend}"
        )
        print(f"tasks: {result['tasks']} in {result['elapsed']:.1f} s = {result['tasks_per_s']:.1f} tasks/s")
        print(
            f"requests: {result['requests']}; latency ms p50 {result['p50_ms']:.1f}  p99 {result['p99_ms']:.1f}  "
            f"max {result['max_ms']:.0f}; over 1 s: {result['over_1s']}"
        )
        print(
            f"whole task (asyncio.run with a new client) ms: p50 {result['task_p50_ms']:.1f}  "
            f"p99 {result['task_p99_ms']:.1f}; outside the requests {result['outside_requests_ms']:.1f} per task"
        )
        print(f"server port sockets afterwards: {result['sockets_after']}")
    print(f"load average after: {load_averages_text()}")
    write_results(args.json, per_task_figures(args, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
