"""Throughput and latency of the store over HTTP.

N client processes each loop: enqueue -> dequeue -> 4 spans -> update_attempt(succeeded), against one server
(started here in its own process, or an existing one with --url). Reports rollouts/s, and per-request p50/p99 as
seen by the clients and by the server (from the server's Prometheus latency histogram, interpolated within buckets).

    .venv/bin/python benchmarks/store_http.py --clients 16 --seconds 20
    .venv/bin/python benchmarks/store_http.py --clients 16 --seconds 20 --spans batch
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from typing import Any, Optional


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _client_loop(url: str, seconds: float, span_mode: str, worker: str) -> dict[str, Any]:
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.types import Span, TraceStatus

    client = LightningStoreClient(url)
    client_ms: list[float] = []

    async def timed(call: Any) -> Any:
        started = time.perf_counter()
        result = await call
        client_ms.append((time.perf_counter() - started) * 1000)
        return result

    rollouts = 0
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
    await client.close()
    return {"rollouts": rollouts, "client_ms": client_ms, "duration": duration}


def _server_quantiles(url: str) -> tuple[float, float, int]:
    """p50 and p99 (ms) of the server's request latency histogram, summed over store operations."""
    import urllib.request

    text = urllib.request.urlopen(f"{url}/v1/agl/metrics", timeout=30).read().decode()
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith("agl_http_request_duration_seconds_bucket{") or 'operation="metrics"' in line:
            continue
        labels, value = line.rsplit(" ", 1)
        bound = labels.split('le="', 1)[1].split('"', 1)[0]
        edge = float("inf") if bound == "+Inf" else float(bound)
        buckets[edge] = buckets.get(edge, 0.0) + float(value)
    edges = sorted(buckets)
    total = buckets[edges[-1]] if edges else 0.0

    def quantile(q: float) -> float:
        target, previous_edge, previous_count = q * total, 0.0, 0.0
        for edge in edges:
            count = buckets[edge]
            if count >= target:
                if edge == float("inf"):
                    return previous_edge * 1000
                share = (target - previous_count) / (count - previous_count) if count > previous_count else 0.0
                return (previous_edge + share * (edge - previous_edge)) * 1000
            previous_edge, previous_count = edge, count
        return float("nan")

    return quantile(0.5), quantile(0.99), int(total)


def _client_process(url: str, seconds: float, span_mode: str, index: int, queue: Any, start: Any) -> None:
    start.wait()
    try:
        import uvloop

        result = uvloop.run(_client_loop(url, seconds, span_mode, f"worker-{index}"))
    except ImportError:
        result = asyncio.run(_client_loop(url, seconds, span_mode, f"worker-{index}"))
    queue.put(result)


def _start_server(backend: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentlightning",
            "store",
            "--backend",
            backend,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        stderr=subprocess.DEVNULL,
        env={key: value for key, value in os.environ.items() if key != "AGL_STORE_API_KEY"},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the server did not start")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--spans", choices=["single", "batch"], default="single", help="add_span x4 or add_many_spans")
    parser.add_argument("--backend", default="memory://", help="store URL for the server started here")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    args = parser.parse_args(argv)

    server = None
    url = args.url
    if url is None:
        server, url = _start_server(args.backend)
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
        start.set()
        results = [queue.get(timeout=args.seconds + 120) for _ in processes]
        elapsed = max(result["duration"] for result in results)
        for process in processes:
            process.join(30)
        server_p50, server_p99, server_requests = _server_quantiles(url)
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
    rollouts = sum(result["rollouts"] for result in results)
    client_ms = [value for result in results for value in result["client_ms"]]
    requests_per_rollout = 3 + (4 if args.spans == "single" else 1)
    print(f"clients={args.clients} seconds={args.seconds} spans={args.spans} backend={args.backend}")
    print(f"rollouts: {rollouts} in {elapsed:.1f} s = {rollouts / elapsed:.0f} rollouts/s")
    print(
        f"requests: {len(client_ms)} ({requests_per_rollout} per rollout) = {len(client_ms) / elapsed:.0f} requests/s"
    )
    print(f"client latency ms: p50 {_percentile(client_ms, 0.5):.2f}  p99 {_percentile(client_ms, 0.99):.2f}")
    print(
        f"server latency ms (histogram of {server_requests} requests, interpolated): "
        f"p50 {server_p50:.2f}  p99 {server_p99:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
