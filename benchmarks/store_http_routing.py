"""The store server's routing of store operations: its own dispatcher against Starlette's router, alternately.

    .venv/bin/python benchmarks/store_http_routing.py                  # 2 rounds, ~4 minutes
    .venv/bin/python benchmarks/store_http_routing.py --rounds 3 --seconds 20

The store's HTTP server routes a store operation either with the `OperationDispatcher` in front of the FastAPI app
(a dict lookup by path segments; `store/http/server/dispatch.py`) or with Starlette's own router inside the app, the
operations registered on it as routes (`--routing starlette` of `benchmarks/store_http.py`). Each round runs, one
after another, `benchmarks/store_http.py` on the workloads of the store_http rows of docs/benchmarks.md:

- 16 clients, memory backend, one request per span (the `store_http_memory` row);
- 16 clients, PostgreSQL backend, spans in batches (the `store_http_postgres_batch` row; skipped without
  PostgreSQL on 127.0.0.1:5432);

each with both routings. Prints each run's figures, then the median over rounds per configuration and the
Starlette router's figure over the dispatcher's, with the commit and the 1-minute load average before and after.
`--json PATH` writes the comparisons (benchmarks/_results.py): the dispatcher's rollouts/s with Starlette's router
as its peer; target: more than 5 % ahead of the router (the bound issue 35 sets for a simplification). Met, the
dispatcher earns its place; not met, the library does the job and the dispatcher has no reason to stay.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, Peer, add_json_argument, write_results
from store_http_libraries import parse, run_once

ROOT = Path(__file__).resolve().parents[1]
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
TOLERANCE = 0.05
"""How far ahead of the library the dispatcher must be to stay."""

# (workload key, label, store_http.py options)
WORKLOADS: list[tuple[str, str, list[str]]] = [
    ("memory", "16 clients, memory backend, single spans", ["--clients", "16"]),
    ("postgres_batch", "16 clients, PostgreSQL backend, batch spans",
     ["--clients", "16", "--backend", POSTGRES, "--spans", "batch"]),
]  # fmt: skip
ROUTINGS = ("dispatcher", "starlette")
FIGURE = "rollouts/s"


def postgres_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=2):
            return True
    except OSError:
        return False


def comparison_figures(results: dict[tuple[str, str], list[dict[str, float]]]) -> list[Figure]:
    """Per workload: the dispatcher's median rollouts/s over the rounds, Starlette's router's as its peer."""
    found = []
    for workload, label, _ in WORKLOADS:
        if (workload, "starlette") not in results:
            continue
        dispatcher = [run[FIGURE] for run in results[(workload, "dispatcher")]]
        starlette = [run[FIGURE] for run in results[(workload, "starlette")]]
        figure = Figure(
            key=f"store.http.routing.{workload}.rollouts_per_s",
            label=f"the store's dispatcher against Starlette's router, {label}",
            value=statistics.median(dispatcher),
            unit="rollouts/s",
            target=f"more than {TOLERANCE:.0%} ahead of Starlette's router (else the router replaces it)",
            higher_is_better=True,
            peer=Peer("Starlette's router", statistics.median(starlette), starlette),
            detail={"rounds": len(dispatcher), "statistic": "median over rounds"},
            rounds=dispatcher,
        )
        figure.met = figure.peer is not None and figure.value > (1 + TOLERANCE) * figure.peer.value
        found.append(figure)
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each timed run")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0:
        parser.error("--rounds must be >= 1 and --seconds > 0")
    workloads = [w for w in WORKLOADS if w[0] != "postgres_batch" or postgres_reachable()]
    if len(workloads) < len(WORKLOADS):
        print("PostgreSQL is not reachable on 127.0.0.1:5432: the PostgreSQL workload is skipped", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    load_before = os.getloadavg()[0]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for round_index in range(args.rounds):
        for workload, label, options in workloads:
            for routing in ROUTINGS:
                values = parse("16 clients", run_once([*options, "--routing", routing], args.seconds))
                results.setdefault((workload, routing), []).append(values)
                shown = ", ".join(f"{name} {value:g}" for name, value in values.items())
                print(f"round {round_index + 1}: {label}, {routing}: {shown}", flush=True)
    load_after = os.getloadavg()[0]
    print()
    print(f"commit {commit.stdout.strip()}; {args.rounds} rounds; load average {load_before:.2f} -> {load_after:.2f}")
    print("| workload | routing | rollouts/s (median) | client p50 ms | CPU ms/rollout | starlette / dispatcher |")
    print("|---|---|---:|---:|---:|---:|")
    for workload, label, _ in workloads:
        base = statistics.median(run[FIGURE] for run in results[(workload, "dispatcher")])
        for routing in ROUTINGS:
            runs = results[(workload, routing)]
            median = statistics.median(run[FIGURE] for run in runs)
            p50 = statistics.median(run["client p50 ms"] for run in runs)
            cpu = statistics.median(run["CPU ms/rollout"] for run in runs)
            print(f"| {label} | {routing} | {median:g} | {p50:g} | {cpu:g} | {median / base:.3f} |")
    write_results(args.json, comparison_figures(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
