"""`agl export` on large SQLite stores: time, records/s and the exporting process's memory over the run.

Usage:
    python benchmarks/export_large_store.py [--spans 100000] [--kind sft] [--format jsonl] [--dir /tmp/agl-export-bench]

Builds (or reuses) two stores in --dir, with a quarter of --spans and with --spans: GRPO-like rollouts of 4 spans
each (an agent span, two LLM calls of one conversation whose second prompt extends the first, with messages and
exact ids of about 240 and 300 prompt tokens, and a reward span), in groups of 4 with `metadata["grpo"]`. Then runs
`python -m agentlightning export` on each in a subprocess, sampling its RSS every 0.1 s. Memory is flat when the
peak RSS does not grow with the store (the export holds a page of rollouts and a few rollouts' spans, never the
store). Prints a Markdown table with the command, commit and load average. `--json PATH` writes the largest
export's peak RSS (flat: within 10 % of the smallest's) and records/s through benchmarks/_results.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _results import Figure, add_json_argument, current_commit, load_averages_text, write_results

from agentlightning.store.sqlite.store import SqliteLightningStore
from agentlightning.types import Span

SPANS_PER_ROLLOUT = 4
GROUP_SIZE = 4
CHUNK = 100


def _rollout_spans(rollout_id: str, attempt_id: str, index: int, rng: random.Random) -> list[Span]:
    task = random.Random(index // GROUP_SIZE)  # the rollouts of a group answer the same prompt
    prompt = [task.randrange(50_000) for _ in range(240)]
    first = [rng.randrange(50_000) for _ in range(30)]
    tool = [rng.randrange(50_000) for _ in range(30)]
    second = [rng.randrange(50_000) for _ in range(20)]
    question = f"Task {index}: what is {index % 97} + {index % 89}? " + "Show your work. " * 20
    trace = f"{index + 1:032x}"

    def make(sequence: int, name: str, attributes: dict[str, Any], parent: Any, start: float) -> Span:
        return Span.from_attributes(
            attributes=attributes,
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=sequence,
            name=name,
            trace_id=trace,
            span_id=f"{index:08x}{sequence:08x}",
            parent_id=parent,
            start_time=start,
            end_time=start + 0.5,
        )

    root = f"{index:08x}{1:08x}"
    call_one = {
        "prompt_token_ids": prompt,
        "response_token_ids": first,
        "gen_ai.response.id": f"chatcmpl-{index}-1",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "You are a careful calculator. Use the add tool.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": question,
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "I will call the add tool.",
    }
    call_two = {
        **{k: v for k, v in call_one.items() if k.startswith("gen_ai.prompt.")},
        "prompt_token_ids": prompt + first + tool,
        "response_token_ids": second,
        "gen_ai.response.id": f"chatcmpl-{index}-2",
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.content": "I will call the add tool.",
        "gen_ai.prompt.3.role": "tool",
        "gen_ai.prompt.3.content": str(index % 97 + index % 89),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": f"The answer is {index % 97 + index % 89}.",
    }
    return [
        make(1, "agent", {"agent.name": "solver"}, None, 0.0),
        make(2, "openai.chat.completion", call_one, root, 1.0),
        make(3, "openai.chat.completion", call_two, root, 2.0),
        make(4, "agentlightning.reward", {"reward": float(rng.random() < 0.5)}, root, 3.0),
    ]


async def _build(path: Path, rollouts: int) -> None:
    store = SqliteLightningStore(str(path))
    rng = random.Random(0)
    try:
        for start in range(0, rollouts, CHUNK):
            spans: list[Span] = []
            attempts: list[tuple[str, str]] = []
            for index in range(start, min(start + CHUNK, rollouts)):
                meta = {"grpo": {"step": index // 64, "round": 0, "group": (index // GROUP_SIZE) % 16, "version": 0}}
                attempted = await store.start_rollout({"index": index // GROUP_SIZE}, mode="train", metadata=meta)
                attempts.append((attempted.rollout_id, attempted.attempt.attempt_id))
                spans.extend(_rollout_spans(attempted.rollout_id, attempted.attempt.attempt_id, index, rng))
            await store.add_many_spans(spans)
            for rollout_id, attempt_id in attempts:
                await store.update_attempt(rollout_id, attempt_id, status="succeeded")
    finally:
        await store.close()


def ensure_store(directory: Path, spans: int) -> Path:
    rollouts = spans // SPANS_PER_ROLLOUT
    path = directory / f"store-{spans}.db"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".building")
    for leftover in directory.glob(partial.name + "*"):
        leftover.unlink()
    started = time.monotonic()
    asyncio.run(_build(partial, rollouts))
    for suffix in ("-wal", "-shm"):
        Path(str(partial) + suffix).unlink(missing_ok=True)
    partial.rename(path)
    print(f"built {path} ({rollouts:,} rollouts, {spans:,} spans) in {time.monotonic() - started:.0f} s", flush=True)
    return path


def run_export(store: Path, out: Path, kind: str, format: str) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "agentlightning",
        "export",
        "--store",
        f"sqlite:///{store}",
        "--kind",
        kind,
        "--format",
        format,
        "--out",
        str(out),
        "--quiet",
        "--summary-json",
    ]
    started = time.monotonic()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    handle = psutil.Process(process.pid)
    samples: list[tuple[float, int]] = []
    while process.poll() is None:
        try:
            samples.append((time.monotonic() - started, handle.memory_info().rss))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    seconds = time.monotonic() - started
    stderr = process.stderr.read() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"export failed ({process.returncode}): {stderr[-2000:]}")
    import json

    summary = json.loads(stderr.strip().splitlines()[-1])
    rss = [value for _, value in samples]

    def at(fraction: float) -> int:
        moment = fraction * seconds
        return next((value for when, value in samples if when >= moment), rss[-1])

    return {
        "seconds": seconds,
        "records": summary["records"],
        "rollouts": summary["rollouts_seen"],
        "rss_mb": {f: at(f) / 2**20 for f in (0.1, 0.5, 0.9)},
        "peak_mb": max(rss) / 2**20,
        "out_mb": out.stat().st_size / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--kind", choices=["sft", "rl", "preference"], default="sft")
    parser.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/agl-export-bench"))
    add_json_argument(parser)
    args = parser.parse_args()
    print(f"commit {current_commit()}, load average before {load_averages_text()}", flush=True)
    sizes = [args.spans // 4, args.spans]
    stores = [ensure_store(args.dir, size) for size in sizes]
    print(f"load average before exporting {load_averages_text()}", flush=True)
    print(
        f"\n| spans | rollouts | records ({args.kind}, {args.format}) | seconds | records/s | RSS at 10% / 50% / 90% "
        "of the run | peak RSS | output |"
    )
    print("|---:|---:|---:|---:|---:|---|---:|---:|")
    results: list[dict[str, Any]] = []
    for size, store in zip(sizes, stores, strict=True):
        out = args.dir / f"export-{size}.{args.format}"
        result = run_export(store, out, args.kind, args.format)
        results.append({"spans": size, **result})
        rss = " / ".join(f"{value:.0f}" for value in result["rss_mb"].values())
        print(
            f"| {size:,} | {result['rollouts']:,} | {result['records']:,} | {result['seconds']:.1f} | "
            f"{result['records'] / result['seconds']:,.0f} | {rss} MB | {result['peak_mb']:.0f} MB | "
            f"{result['out_mb']:.0f} MB |",
            flush=True,
        )
        out.unlink(missing_ok=True)
    print(f"\nload average after {load_averages_text()}")
    write_results(args.json, export_figures(args.kind, args.format, results))


def export_figures(kind: str, format: str, results: list[dict[str, Any]]) -> list[Figure]:
    """Peak RSS of the largest export against the smallest's (flat: within 10 %), and records/s of the largest."""
    small, large = results[0], results[-1]
    growth = large["peak_mb"] / small["peak_mb"]
    detail = {"runs": [{k: v for k, v in r.items() if k != "rss_mb"} for r in results]}
    return [
        Figure(
            key=f"export.{kind}.{format}.peak_rss_mb",
            label=f"`agl export` ({kind}, {format}) of a {large['spans']:,}-span store: peak RSS "
            f"({small['peak_mb']:.0f} MB at {small['spans']:,} spans)",
            value=round(large["peak_mb"], 1),
            unit="MB",
            target="flat (streaming): within 10 % at 4 times the spans",
            met=growth <= 1.10 if kind != "preference" else None,
            higher_is_better=False,
            detail=detail,
        ),
        Figure(
            key=f"export.{kind}.{format}.records_per_s",
            label=f"`agl export` ({kind}, {format}) of a {large['spans']:,}-span store: records/s",
            value=round(large["records"] / large["seconds"]),
            unit="records/s",
            detail={"records": large["records"], "seconds": round(large["seconds"], 1)},
        ),
    ]


if __name__ == "__main__":
    main()
