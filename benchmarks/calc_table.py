"""The results table of examples/calc_agent/README.md, generated from `benchmarks/results/calc_<framework>.json`.

Each framework is its own benchmark (`run_all.py --only calc_openai`, ...: one result file each, so a framework
measured in a later session replaces only its own figures). `summary_table.regenerate` rewrites the text between
`BEGIN` and `END` in the README with `calc_section` of every framework's newest committed result, with each run's
command, date, commit, load and CPU, never a hand-copied table; `tests/benchmarks/test_summary_table.py` fails when
the README disagrees with the result files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import summary_table  # benchmarks/summary_table.py (benchmarks/ is on sys.path: the callers put it there)

__all__ = [
    "BEGIN",
    "BENCHMARKS",
    "END",
    "FRAMEWORK_NAMES",
    "README",
    "benchmark_name",
    "calc_section",
    "render_calc_table",
]

BEGIN = "<!-- calc-results:begin -->"
END = "<!-- calc-results:end -->"
README = Path(__file__).resolve().parent.parent / "examples" / "calc_agent" / "README.md"
FRAMEWORK_NAMES = {
    "langgraph": "LangGraph",
    "openai": "plain OpenAI SDK",
    "agents-sdk": "OpenAI Agents SDK",
    "autogen": "AutoGen AgentChat",
}
"""The calculator example's frameworks (`train.py --framework`) in the table's order, with the names it shows."""


def benchmark_name(framework: str) -> str:
    """The benchmark (run_all entry and result file in benchmarks/results/) of one framework: `calc_agents_sdk`."""
    return f"calc_{framework.replace('-', '_')}"


BENCHMARKS = tuple(benchmark_name(framework) for framework in FRAMEWORK_NAMES)


def _pair(values: Optional[Sequence[Any]]) -> str:
    if not values or len(values) != 2:
        return "n/a"
    return " -> ".join("n/a" if value is None else f"{value:.2f}" for value in values)


def _steps(value: Any) -> str:
    if isinstance(value, list):
        return "/".join(str(steps) for steps in value) or "n/a"
    return "n/a" if value is None else str(value)


def render_calc_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: one row per framework of the calc_* results, in the order given (each result's frameworks in the
    order measured). Results over seeds (gains carrying `n_seeds`) or with the most-called tool's share get columns
    for the seeds, the gain's spread, the lowest seed and that share; older single-seed results render as they did."""
    figures = {str(figure["key"]): figure for record in records for figure in record["figures"]}
    frameworks = [key.split(".")[1] for key in figures if key.startswith("calc.") and key.endswith(".strict_gain")]
    over_seeds = any(
        "n_seeds" in (figures[f"calc.{name}.strict_gain"].get("detail") or {})
        or f"calc.{name}.top_tool_share" in figures
        for name in frameworks
    )
    if over_seeds:
        lines = [
            "| framework | seeds | steps | held-out strict gain, mean ± std | lowest seed | | valid tool call "
            "| LLM calls per rollout | drift | top tool share after | |",
            "|---|---:|---:|---|---:|---|---|---|---|---:|---|",
        ]
    else:
        lines = [
            "| framework | steps | held-out strict gain | | valid tool call | LLM calls per rollout | drift |",
            "|---|---:|---|---|---|---|---|",
        ]
    for name in frameworks:
        gain = figures[f"calc.{name}.strict_gain"]
        calls = figures.get(f"calc.{name}.calls_per_rollout")
        drift = figures.get(f"calc.{name}.drift_rate")
        share = figures.get(f"calc.{name}.top_tool_share")
        detail = gain.get("detail") or {}
        strict = f" ({_pair(detail['strict'])})" if "strict" in detail else ""
        spread = f" ± {detail['std']:.2f}" if over_seeds and detail.get("std") is not None else ""
        target = summary_table.verdict(gain) + (f" ({gain['target']})" if gain.get("target") else "")
        tail = [
            _pair(detail.get("valid_tool_call")),
            _pair([(calls.get("detail") or {}).get("before"), calls["value"]]) if calls else "n/a",
            summary_table.format_value(drift["value"]) if drift else "n/a",
        ]
        if over_seeds:
            lowest = detail.get("min")
            cells = [
                FRAMEWORK_NAMES.get(name, name),
                str(detail.get("n_seeds", 1)),
                _steps(detail.get("steps")),
                f"{gain['value']:+.2f}{spread}{strict}",
                "n/a" if lowest is None else f"{lowest:+.2f}",
                target,
                *tail,
                "n/a" if share is None else f"{share['value']:.2f}",
                "" if share is None else summary_table.verdict(share) + f" ({share['target']})",
            ]
        else:
            cells = [FRAMEWORK_NAMES.get(name, name), _steps(detail.get("steps")), f"{gain['value']:+.2f}{strict}",
                     target, *tail]  # fmt: skip
        lines.append("| " + " | ".join(summary_table.cell(text) for text in cells) + " |")
    return "\n".join(lines) + "\n"


def calc_section(records: Sequence[Mapping[str, Any]]) -> str:
    """What goes between the markers: where the figures come from (each result's command, commit, date, load, CPU),
    then the table and where each seed ran."""
    sources = "\n".join(f"- {_source(record)}" for record in records)
    note = (
        "Generated by `benchmarks/calc_table.py` from `benchmarks/results/calc_<framework>.json` (do not edit by hand). "
        "The same figures, with the overview's verdicts, are the calculator rows of "
        "[docs/benchmarks.md](../../docs/benchmarks.md) and `calc.*` in its appendix. Measured by:"
    )
    table = render_calc_table(records)
    return f"{BEGIN}\n{note}\n\n{sources}\n\n{table}{_runs(records)}{END}"


def _source(record: Mapping[str, Any]) -> str:
    command = re.sub(r" --json \S+", "", str(record.get("command", "")))  # train.py options after `--` stay
    load = " -> ".join(
        "n/a" if v is None else f"{v:.1f}" for v in (record.get("load_before"), record.get("load_after"))
    )
    quick = " (short settings of `run_all.py --quick`)" if record.get("run_all", {}).get("mode") == "quick" else ""
    return (
        f"`{command}`{quick} at commit {record['commit']}, {str(record['date'])[:16].replace('T', ' ')} UTC, load "
        f"{load}, {summary_table.machine_label(record.get('machine'))}"
    )


def _runs(records: Sequence[Mapping[str, Any]]) -> str:
    """Where and when each seed ran, for results over seeds (their runs may span days): commit, date, load, CPU."""
    lines = []
    for figure in (figure for record in records for figure in record["figures"]):
        key = str(figure["key"])
        seeds = (figure.get("detail") or {}).get("per_seed") if key.endswith(".strict_gain") else None
        if not seeds:
            continue
        runs = "; ".join(
            f"seed {run.get('seed')}: {run.get('commit') or 'n/a'}, {str(run.get('finished') or 'n/a')[:16].replace('T', ' ')}, "
            f"load {' -> '.join('n/a' if v is None else f'{v:.1f}' for v in run.get('load') or [None, None])}, "
            f"{summary_table.machine_label({'cpu': run['cpu']}) if run.get('cpu') else 'CPU n/a'}"
            for run in seeds
        )
        lines.append(f"- {FRAMEWORK_NAMES.get(key.split('.')[1], key.split('.')[1])}: {runs}")
    return "\nRuns (commit, finished UTC, load before -> after, CPU):\n\n" + "\n".join(lines) + "\n" if lines else ""
