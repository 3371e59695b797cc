"""The results table of examples/calc_agent/README.md, generated from `benchmarks/results/calc_frameworks.json`.

`summary_table.regenerate` rewrites the text between `BEGIN` and `END` in the README with `calc_section`, so the
example shows the figures of the newest committed run, with its date, commit, load and CPU, never a hand-copied
table; `tests/benchmarks/test_summary_table.py` fails when the README disagrees with the result file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import summary_table  # benchmarks/summary_table.py (benchmarks/ is on sys.path: the callers put it there)

__all__ = ["BEGIN", "BENCHMARK", "END", "README", "calc_section", "render_calc_table"]

BEGIN = "<!-- calc-results:begin -->"
END = "<!-- calc-results:end -->"
BENCHMARK = "calc_frameworks"  # the result file's name in benchmarks/results/
README = Path(__file__).resolve().parent.parent / "examples" / "calc_agent" / "README.md"
FRAMEWORK_NAMES = {
    "langgraph": "LangGraph",
    "openai": "plain OpenAI SDK",
    "agents-sdk": "OpenAI Agents SDK",
    "autogen": "AutoGen AgentChat",
}


def _pair(values: Optional[Sequence[Any]]) -> str:
    if not values or len(values) != 2:
        return "n/a"
    return " -> ".join("n/a" if value is None else f"{value:.2f}" for value in values)


def _steps(value: Any) -> str:
    if isinstance(value, list):
        return "/".join(str(steps) for steps in value) or "n/a"
    return "n/a" if value is None else str(value)


def render_calc_table(record: Mapping[str, Any]) -> str:
    """Markdown: one row per framework of a calc_frameworks result, in the order measured. A result over seeds
    (its gains carry `n_seeds`) or with the most-called tool's share gets columns for the seeds, the gain's spread,
    the lowest seed and that share; an older single-seed result renders as it always did."""
    figures = {str(figure["key"]): figure for figure in record["figures"]}
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


def calc_section(record: Mapping[str, Any]) -> str:
    """What goes between the markers: where the figures come from (run, commit, date, load, CPU), then the table."""
    command = re.sub(r" --json \S+", "", str(record.get("command", "")))  # train.py options after `--` stay
    load = " -> ".join(
        "n/a" if v is None else f"{v:.1f}" for v in (record.get("load_before"), record.get("load_after"))
    )
    quick = " (short settings of `run_all.py --quick`)" if record.get("run_all", {}).get("mode") == "quick" else ""
    note = (
        f"Generated by `benchmarks/calc_table.py` from `benchmarks/results/{BENCHMARK}.json` (do not edit by hand): "
        f"`{command}`{quick} at commit {record['commit']}, {str(record['date'])[:16].replace('T', ' ')} UTC, load "
        f"{load}, {summary_table.machine_label(record.get('machine'))}. The same figures, with the overview's verdicts, "
        'are the rows "Does a multi-turn tool-calling agent learn, in each framework?" of '
        "[docs/benchmarks.md](../../docs/benchmarks.md) and `calc.*` in its appendix."
    )
    return f"{BEGIN}\n{note}\n\n{render_calc_table(record)}{_runs(record)}{END}"


def _runs(record: Mapping[str, Any]) -> str:
    """Where and when each seed ran, for a result over seeds (its runs may span days): commit, date, load, CPU."""
    lines = []
    for figure in record["figures"]:
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
