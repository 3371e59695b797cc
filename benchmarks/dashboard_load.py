"""Dashboard load times in Chromium: the rollout table over 100,000 rollouts in SQLite, and the detail of a rollout
with 2,000 spans.

Usage:
    python benchmarks/dashboard_load.py [--rollouts 100000] [--spans 2000] [--loads 5] [--db PATH] [--json OUT]

Builds a SQLite store (100,000 queued rollouts, 2,000 of them finished, plus one rollout with --spans spans of
LLM calls, tools and turns), serves it with the store server, and opens the dashboard in Debian's Chromium (headless,
driven by Playwright; never downloaded) --loads times, each in a fresh browser context (empty cache). Reported, as
median and worst of the loads, in milliseconds since navigation start:

    rollout table   `#/rollouts` (newest first, 50 rows): the first paint of the table (`agl:rollouts-painted`)
    failed filter   `#/rollouts?status=failed`: the same with a server-side status filter
    rollout detail  `#/rollouts/<id>`: the waterfall with its first 250 spans (`agl:rollout-first-spans`) and
                    with all of them (`agl:rollout-painted`)

plus the time the store server took to answer the page's query (Resource Timing). With --db the database is kept
and reused when it already holds the requested data; otherwise it is built in a temporary folder and removed.
`--json PATH` writes the figures against their target (< 1 s) through benchmarks/_results.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _results import Figure, add_json_argument, write_results

from agentlightning.store import store_from_url
from agentlightning.store.client_server import LightningStoreServer
from agentlightning.types import EnqueueRolloutRequest
from tests.dashboard.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.dashboard.run_data import add_wide_rollout

WIDE_MARKER = "dashboard-benchmark-wide"


async def build(url: str, rollouts: int, spans: int) -> str:
    """Fill the store (unless it already holds this data); returns the id of the wide rollout."""
    store = store_from_url(url)
    try:
        existing = await store.query_rollouts(limit=1)
        wide = await store.query_rollouts(status_in=["succeeded"], sort_by="start_time", sort_order="desc", limit=1)
        if existing.total == rollouts + 1 and wide and wide[0].input == {"task": f"a long episode with {spans} spans"}:  # type: ignore[attr-defined]
            print(f"reusing {url}: {existing.total:,} rollouts", file=sys.stderr)  # type: ignore[attr-defined]
            return wide[0].rollout_id
        if existing.total:  # type: ignore[attr-defined]
            raise SystemExit(f"{url} holds other data; pass a new --db path")
        started = time.perf_counter()
        batch = 1000
        for offset in range(0, rollouts, batch):
            count = min(batch, rollouts - offset)
            requests = [
                EnqueueRolloutRequest(
                    input={"task": f"question {offset + index}", "answer": offset + index}, mode="train"
                )
                for index in range(count)
            ]
            await store.enqueue_many_rollouts(requests)
        finished = min(2000, rollouts)
        claimed = await store.dequeue_many_rollouts(limit=finished, worker_id="bench-runner")
        for index, rollout in enumerate(claimed):
            status = "failed" if index % 10 == 0 else "succeeded"
            await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status=status)
        wide_id = await add_wide_rollout(store, spans)
        print(f"built {url} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return wide_id
    finally:
        await store.close()


def measure(base: str, route: str, mark: str, loads: int, first_mark: str = "") -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    painted: list[float] = []
    first: list[float] = []
    server: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(loads + 1):  # the first load warms the server's caches and is not counted
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                page.goto(f"{base}/{route}")
                page.wait_for_function(f"() => performance.getEntriesByName({mark!r}).length > 0", timeout=60_000)
                timing = page.evaluate(
                    f"""() => ({{
                        painted: performance.getEntriesByName({mark!r})[0].startTime,
                        first: (performance.getEntriesByName({first_mark!r})[0]
                            || performance.getEntriesByName({mark!r})[0]).startTime,
                        server: Math.max(0, ...performance.getEntriesByType('resource')
                            .filter(e => e.name.includes('/v1/agl/rollouts') || e.name.includes('/v1/agl/spans?'))
                            .filter(e => !e.name.includes('name='))
                            .map(e => e.responseEnd - e.requestStart)),
                    }})"""
                )
                painted.append(timing["painted"])
                first.append(timing["first"])
                server.append(timing["server"])
                context.close()
        finally:
            browser.close()
    painted, first, server = painted[1:], first[1:], server[1:]
    return {
        "route": route,
        "loads": loads,
        "painted_ms_median": round(statistics.median(painted), 1),
        "painted_ms_max": round(max(painted), 1),
        "first_ms_median": round(statistics.median(first), 1),
        "slowest_query_ms_median": round(statistics.median(server), 1),
        "painted_ms": [round(value, 1) for value in painted],
        "first_ms": [round(value, 1) for value in first],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--spans", type=int, default=2000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--db", default=None, help="SQLite file to build (or reuse); default: a temporary one")
    add_json_argument(parser)
    args = parser.parse_args()

    folder = None
    if args.db is None:
        folder = tempfile.TemporaryDirectory(prefix="agl-dashboard-bench-")
        db = Path(folder.name) / "bench.db"
    else:
        db = Path(args.db)
    url = f"sqlite:///{db}"
    try:
        wide = asyncio.run(build(url, args.rollouts, args.spans))
        store = store_from_url(url)
        server = LightningStoreServer(store, port=0)
        asyncio.run(server.start())
        try:
            results = [
                {"view": "rollout table", **measure(server.endpoint, "#/rollouts", "agl:rollouts-painted", args.loads)},
                {
                    "view": "failed filter",
                    **measure(server.endpoint, "#/rollouts?status=failed", "agl:rollouts-painted", args.loads),
                },
                {
                    "view": f"rollout detail ({args.spans:,} spans)",
                    **measure(
                        server.endpoint,
                        f"#/rollouts/{wide}",
                        "agl:rollout-painted",
                        args.loads,
                        first_mark="agl:rollout-first-spans",
                    ),
                },
            ]
        finally:
            asyncio.run(server.stop())
            asyncio.run(store.close())
    finally:
        if folder is not None:
            folder.cleanup()

    print(f"SQLite store: {args.rollouts:,} rollouts + one with {args.spans:,} spans; {args.loads} fresh loads each")
    print("| view | first paint, median ms | complete, median ms | complete, worst ms | slowest API query, median ms |")
    print("|---|---:|---:|---:|---:|")
    for result in results:
        print(
            f"| {result['view']} | {result['first_ms_median']:,.0f} | {result['painted_ms_median']:,.0f} | "
            f"{result['painted_ms_max']:,.0f} | {result['slowest_query_ms_median']:,.0f} |"
        )
    write_results(args.json, dashboard_figures(results, args.rollouts, args.spans, args.loads))


def dashboard_figures(results: list[dict[str, Any]], rollouts: int, spans: int, loads: int) -> list[Figure]:
    """The rollout table's paint and the detail's first and complete paints, medians, against < 1 s."""
    table, _, detail = results
    chosen = [
        ("rollout_table_ms", f"dashboard: rollout table painted, {rollouts:,} rollouts (SQLite)", table["painted_ms_median"],
         table.get("painted_ms", [])),
        ("detail_first_spans_ms", f"dashboard: detail of a rollout with {spans:,} spans, first 250 spans painted",
         detail["first_ms_median"], detail.get("first_ms", [])),
        ("detail_complete_ms", f"dashboard: detail of a rollout with {spans:,} spans, all painted",
         detail["painted_ms_median"], detail.get("painted_ms", [])),
    ]  # fmt: skip
    return [
        Figure(
            key=f"dashboard.{key}",
            label=label,
            value=value,
            unit="ms",
            target="< 1,000 ms (median)",
            met=value < 1000,
            higher_is_better=False,
            detail={"loads": loads, "views": results},
            rounds=list(each_load),
        )
        for key, label, value, each_load in chosen
    ]


if __name__ == "__main__":
    main()
