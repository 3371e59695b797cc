"""The store's own HTTP pieces against the libraries they replace, measured alternately in the same run.

    .venv/bin/python benchmarks/store_http_libraries.py                 # 2 rounds, ~6 minutes
    .venv/bin/python benchmarks/store_http_libraries.py --rounds 3 --seconds 20

The piece that is ours: the keep-alive HTTP/1.1 client of `store/http/client/lite.py` (the alternatives: aiohttp,
which the store client uses for https://, and httpx when it is installed, through `benchmarks/_httpx_session.py`). (A second piece, a transport around uvicorn's protocol that sent each answer in
one write, was removed: it measured 1.01x uvicorn's own protocol, a tie; the server runs on uvicorn's stock protocol.)
Each round runs, one after another, `benchmarks/store_http.py` with:

- 16 long-lived clients (enqueue, dequeue, 4 `add_span`, update per rollout; memory backend);
- short-lived clients (`--client-per-task`: a fresh client and `asyncio.run` per task, 16 processes);
- a fresh process's first request (`--first-request`);

each with ours, `--client aiohttp` and `--client httpx`.

Prints each run's figures, then the median over rounds of each configuration and its ratio to ours, with the commit
and the 1-minute load average before and after the whole comparison. `--json PATH` writes the comparisons of the
summary (ours with the library as the peer; target: ours better) through benchmarks/_results.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, Peer, add_json_argument, write_results

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(Path(__file__).resolve().parent / "store_http.py")

HAS_HTTPX = importlib.util.find_spec("httpx") is not None

# (workload, configuration, store_http.py options); ours first in each workload
WORKLOADS: list[tuple[str, list[str]]] = [
    ("16 clients", []),
    ("client per task", ["--client-per-task"]),
    ("first request", ["--first-request"]),
]
CONFIGURATIONS: list[tuple[str, str, list[str]]] = [
    (workload, configuration, options + extra)
    for workload, options in WORKLOADS
    for configuration, extra in [
        ("ours (lite client)", []),
        ("aiohttp client", ["--client", "aiohttp"]),
        *([("httpx client", ["--client", "httpx"])] if HAS_HTTPX else []),
    ]
]

# What each workload's figures are, read from store_http.py's output: (name, regex, higher is better).
FIGURES: dict[str, list[tuple[str, str, bool]]] = {
    "16 clients": [
        ("rollouts/s", r"= ([\d.]+) rollouts/s", True),
        ("client p50 ms", r"client latency ms: p50 ([\d.]+)", False),
        ("client p99 ms", r"client latency ms: p50 [\d.]+\s+p99 ([\d.]+)", False),
        ("CPU ms/rollout", r"CPU ms per rollout: .*total ([\d.]+)", False),
    ],
    "client per task": [
        ("tasks/s", r"= ([\d.]+) tasks/s", True),
        ("request p99 ms", r"latency ms p50 [\d.]+\s+p99 ([\d.]+)", False),
        ("task p50 ms", r"whole task .* ms: p50 ([\d.]+)", False),
    ],
    "first request": [
        ("first request ms", r"first request ([\d.]+) ms", False),
        ("import ms", r"import agentlightning (\d+) ms", False),
    ],
}


# The summary's comparisons: (key, label, workload, figure, the alternative's configuration, unit).
COMPARISONS: list[tuple[str, str, str, str, str, str]] = [
    ("client.rollouts_per_s", "the store's HTTP client against aiohttp, 16 clients", "16 clients", "rollouts/s",
     "aiohttp client", "rollouts/s"),
    ("client.cpu_ms_per_rollout", "the store's HTTP client against aiohttp: CPU per rollout", "16 clients",
     "CPU ms/rollout", "aiohttp client", "ms"),
    ("per_task.tasks_per_s", "the store's HTTP client against aiohttp, a client per task", "client per task",
     "tasks/s", "aiohttp client", "tasks/s"),
    ("first_request_ms", "the store's HTTP client against aiohttp: a fresh process's first request",
     "first request", "first request ms", "aiohttp client", "ms"),
    ("httpx.rollouts_per_s", "the store's HTTP client against httpx, 16 clients", "16 clients", "rollouts/s",
     "httpx client", "rollouts/s"),
    ("httpx.cpu_ms_per_rollout", "the store's HTTP client against httpx: CPU per rollout", "16 clients",
     "CPU ms/rollout", "httpx client", "ms"),
    ("httpx.per_task.tasks_per_s", "the store's HTTP client against httpx, a client per task", "client per task",
     "tasks/s", "httpx client", "tasks/s"),
    ("httpx.first_request_ms", "the store's HTTP client against httpx: a fresh process's first request",
     "first request", "first request ms", "httpx client", "ms"),
]  # fmt: skip


def comparison_figures(results: dict[tuple[str, str], list[dict[str, float]]]) -> list[Figure]:
    """Ours against the library it replaces: the medians over the rounds of each (workload, configuration), with each
    round's value kept on both sides."""
    found = []
    for key, label, workload, name, alternative, unit in COMPARISONS:
        if (workload, alternative) not in results:
            continue  # a side that did not run (httpx not installed)
        ours_config = next(config for load, config, _ in CONFIGURATIONS if load == workload)
        higher = next(better for figure, _, better in FIGURES[workload] if figure == name)
        ours = [run[name] for run in results[(workload, ours_config)]]
        theirs = [run[name] for run in results[(workload, alternative)]]
        figure = Figure(
            key=f"store.http.libraries.{key}",
            label=label,
            value=statistics.median(ours),
            unit=unit,
            target="ours better than the library",
            higher_is_better=higher,
            peer=Peer(alternative, statistics.median(theirs), theirs),
            detail={"rounds": len(ours), "statistic": "median over rounds"},
            rounds=ours,
        )
        figure.met = figure.ratio is not None and figure.ratio > 1
        found.append(figure)
    return found


def run_once(options: list[str], seconds: float) -> str:
    command = [sys.executable, SCRIPT, *options]
    if "--first-request" not in options:
        command += ["--seconds", str(seconds)]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=seconds + 600)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout


def parse(workload: str, output: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for name, pattern, _ in FIGURES[workload]:
        match = re.search(pattern, output)
        if match is None:
            raise RuntimeError(f"no '{name}' in the output of a {workload} run:\n{output}")
        values[name] = float(match.group(1))
    return values


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each timed run")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0:
        parser.error("--rounds must be >= 1 and --seconds > 0")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    load_before = os.getloadavg()[0]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for round_index in range(args.rounds):
        for workload, configuration, options in CONFIGURATIONS:
            values = parse(workload, run_once(options, args.seconds))
            results.setdefault((workload, configuration), []).append(values)
            shown = ", ".join(f"{name} {value:g}" for name, value in values.items())
            print(f"round {round_index + 1}: {workload}, {configuration}: {shown}", flush=True)
    load_after = os.getloadavg()[0]
    print()
    print(f"commit {commit.stdout.strip()}; {args.rounds} rounds; load average {load_before:.2f} -> {load_after:.2f}")
    print("| workload | configuration | figure | median | ours / it |")
    print("|---|---|---|---:|---:|")
    for workload, configuration, _ in CONFIGURATIONS:
        ours = next(name for load, name, _ in CONFIGURATIONS if load == workload)
        for name, _, higher_is_better in FIGURES[workload]:
            median = statistics.median(run[name] for run in results[(workload, configuration)])
            base = statistics.median(run[name] for run in results[(workload, ours)])
            # "ours / it" > 1 means ours is better, whichever way the figure points.
            ratio = (base / median if higher_is_better else median / base) if median and base else float("nan")
            print(f"| {workload} | {configuration} | {name} | {median:g} | {ratio:.2f} |")
    write_results(args.json, comparison_figures(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
