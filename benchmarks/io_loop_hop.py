"""What a store call costs when it goes through the process's I/O loop instead of running on the caller's loop.

Issue 35 (item 1) would let the store clients live on the one I/O loop (`agentlightning.utils.io_loop`) and become
the stock clients, at the price of a thread hop for every call made from another event loop. This measures that price
on a small read (`get_rollout_by_id`), one call at a time (the latency one caller sees):

- the HTTP store client against a store server started here on loopback (memory backend): awaited on the caller's
  loop, as today, and through `await io_loop().run_async(...)` from the caller's loop (the hop);
- the in-process memory store, the same two ways, so that the hop's own cost shows without a network in between.

The two ways alternate in rounds of `--calls` calls (after a warm-up), so a drift in the machine's load touches both.
Prints (and writes with `--json`) the median microseconds per call of each way and the hop's cost.

    python benchmarks/io_loop_hop.py                 # 10 rounds of 200 calls each way
    python benchmarks/io_loop_hop.py --rounds 3      # shorter
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _servers as servers  # benchmarks/_servers.py
from _results import Figure, Peer, add_json_argument, write_results

from agentlightning.store.base import LightningStore
from agentlightning.store.http.client.client import LightningStoreClient
from agentlightning.store.memory.store import InMemoryLightningStore
from agentlightning.utils.io_loop import io_loop

Call = Callable[[], Awaitable[Any]]


async def _timed(call: Call, calls: int) -> list[float]:
    """Microseconds of each of `calls` sequential awaits of `call()`."""
    spent: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        spent.append((time.perf_counter() - started) * 1e6)
    return spent


async def compare(store: LightningStore, rounds: int, calls: int) -> dict[str, list[list[float]]]:
    """Per-call microseconds, round by round, of a read awaited on this loop ("direct") and through the I/O loop
    ("hop")."""
    rollout = await store.enqueue_rollout({"question": "1 + 1"})
    rollout_id = rollout.rollout_id

    def direct() -> Awaitable[Any]:
        return store.get_rollout_by_id(rollout_id)

    def hop() -> Awaitable[Any]:
        return io_loop().run_async(store.get_rollout_by_id(rollout_id))

    await _timed(direct, calls)  # warm-up: connections, caches
    await _timed(hop, calls)
    found: dict[str, list[list[float]]] = {"direct": [], "hop": []}
    for _ in range(rounds):
        found["direct"].append(await _timed(direct, calls))
        found["hop"].append(await _timed(hop, calls))
    return found


def _start_store_server() -> tuple[subprocess.Popen[bytes], str]:
    def command(port: int) -> list[str]:
        store = [sys.executable, "-m", "agentlightning", "store", "--backend", "memory://"]
        return [*store, "--port", str(port), "--log-level", "warning"]

    env = {key: value for key, value in os.environ.items() if key != "AGL_STORE_API_KEY"}
    process, port = servers.start_server(command, name="the store server", timeout=60, env=env)
    return process, f"http://127.0.0.1:{port}"


def _figure(kind: str, label: str, found: dict[str, list[list[float]]]) -> Figure:
    every = {way: [value for round_ in rounds for value in round_] for way, rounds in found.items()}
    direct, hop = statistics.median(every["direct"]), statistics.median(every["hop"])
    return Figure(
        key=f"io_loop.hop.{kind}_us",
        label=f"{label}, one call at a time, through the I/O loop (median per call)",
        value=round(hop, 1),
        unit="µs per call",
        peer=Peer(
            name="awaited on the caller's loop",
            value=round(direct, 1),
            rounds=[round(statistics.median(values), 1) for values in found["direct"]],
        ),
        detail={
            "hop_added_us": round(hop - direct, 1),
            "p90_hop_us": round(statistics.quantiles(every["hop"], n=10)[-1], 1),
            "p90_direct_us": round(statistics.quantiles(every["direct"], n=10)[-1], 1),
            "calls_each": len(every["hop"]),
        },
        higher_is_better=False,
        rounds=[round(statistics.median(values), 1) for values in found["hop"]],
    )


async def _run(args: argparse.Namespace) -> list[Figure]:
    figures = []
    memory = await compare(InMemoryLightningStore(), args.rounds, args.calls)
    figures.append(_figure("memory", "Memory store read (get_rollout_by_id) in process", memory))
    server, url = _start_store_server()
    try:
        client = LightningStoreClient(url)
        try:
            http = await compare(client, args.rounds, args.calls)
        finally:
            await client.close()
    finally:
        server.terminate()
        server.wait(30)
    figures.append(_figure("http", "HTTP store read (get_rollout_by_id) over loopback", http))
    return figures


def main(argv: Optional[list[str]] = None) -> list[Figure]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200, help="calls per round, each way")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    figures = asyncio.run(_run(args))
    for figure in figures:
        assert figure.peer is not None
        print(
            f"{figure.label}: {figure.value} µs (awaited on the caller's loop: {figure.peer.value} µs; "
            f"the hop adds {figure.detail['hop_added_us']} µs)"
        )
    write_results(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
