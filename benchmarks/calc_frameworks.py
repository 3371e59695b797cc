"""The calculator agent trained in each framework over seeds: held-out accuracy and tool use before/after.

    .venv/bin/python benchmarks/calc_frameworks.py --seeds 0 1 2 --minutes 15            # all four, three seeds each
    .venv/bin/python benchmarks/calc_frameworks.py --frameworks langgraph --seed 0 --minutes 15
    .venv/bin/python benchmarks/calc_frameworks.py --seeds 0 1 2 -- --balance-by-op      # further train.py options
    .venv/bin/python benchmarks/calc_frameworks.py --from-runs runs/bench-calc-langgraph-seed0  # print existing runs

Each (framework, seed) runs `examples/calc_agent/train.py --framework F --fresh --seed S --minutes M [options]` (the
command behind `bash scripts/train.sh calc`) into `runs/bench-calc-F-seedS`, and its figures are read from its
summary.json. Beside it the benchmark writes `bench_run.json`: the settings (framework, seed, minutes, further
train.py options), the commit and package tree, the date, the CPU model and the 1-minute load average before and
after the run. The entries are resumable: a (framework, seed) whose run directory holds a finished run with the
same settings is read, not run again (it says so, with the commit, date, CPU and load it recorded), so the seeds may
be run over several days on the same kind of machine.

Prints one row per run. `--json PATH` writes per framework, through benchmarks/_results.py: the strict held-out gain
as the mean over the seeds (met: mean >= +0.30 and no seed below +0.15; the detail has each seed's gain, the lowest,
the population standard deviation and each run's load, CPU and commit), the share of the held-out tool calls taken
by the most-called tool after training (the highest over the seeds; target below 0.90: a model that calls `add` for
every question is not using the tools), the LLM calls per rollout after training (mean over the seeds; target >= 2)
and the drift rate (the worst seed; target 0).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import (  # noqa: E402
    Figure,
    add_json_argument,
    current_commit,
    load_average,
    machine_facts,
    package_tree,
    write_results,
)

FRAMEWORKS = ["langgraph", "openai", "agents-sdk", "autogen"]
RUNS = ROOT / "runs"
RUN_RECORD = "bench_run.json"  # the benchmark's record of one finished (framework, seed), beside summary.json
GAIN_TARGET = 0.30  # the mean strict held-out gain over the seeds
SEED_FLOOR = 0.15  # no seed's strict held-out gain below this
TOP_TOOL_LIMIT = 0.90  # the most-called tool's share of the held-out tool calls stays below this


def run_dir_of(framework: str, seed: int, runs: Path = RUNS) -> Path:
    return runs / f"bench-calc-{framework}-seed{seed}"


def settings_of(framework: str, seed: int, minutes: float, extra: Sequence[str]) -> dict[str, Any]:
    """What makes two runs the same entry: a finished run with equal settings is reused."""
    return {"framework": framework, "seed": seed, "minutes": float(minutes), "train_options": list(extra)}


def finished_record(run_dir: Path, settings: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The record of the finished run in `run_dir` when it was made with `settings`, else None (no run, an
    unfinished one, or other settings)."""
    try:
        record = json.loads((run_dir / RUN_RECORD).read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("settings") != settings:
        return None
    if summary.get("framework") != settings["framework"] or summary.get("settings", {}).get("seed") != settings["seed"]:
        return None
    return record


def launch(framework: str, seed: int, minutes: float, extra: Sequence[str], run_dir: Path) -> None:
    """Train the agent once: train.py into `run_dir`, starting afresh (raises when it fails)."""
    command = [
        sys.executable, str(ROOT / "examples" / "calc_agent" / "train.py"), "--framework", framework, "--fresh",
        "--no-live", "--seed", str(seed), "--minutes", str(minutes), "--run-dir", str(run_dir), *extra,
    ]  # fmt: skip
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def run(framework: str, seed: int, minutes: float, extra: Sequence[str], runs: Path = RUNS) -> dict[str, Any]:
    """The record of (framework, seed): read from its run directory when a finished run with these settings is
    there, else made by training now (with the commit, package tree, CPU and load before and after)."""
    run_dir = run_dir_of(framework, seed, runs)
    settings = settings_of(framework, seed, minutes, extra)
    found = finished_record(run_dir, settings)
    if found is not None:
        print(f"reused {run_dir} ({describe(found)})", flush=True)
        return {**found, "reused": True}
    (run_dir / RUN_RECORD).unlink(missing_ok=True)  # a stale record must not vouch for the run about to start
    facts = machine_facts()
    record: dict[str, Any] = {
        "settings": settings,
        "commit": current_commit(),
        "package_tree": package_tree(),
        "cpu": facts["cpu"],
        "cpus": facts["cpus"],
        "started": _now(),
        "load_before": load_average(),
    }
    launch(framework, seed, minutes, extra, run_dir)
    record |= {"finished": _now(), "load_after": load_average()}
    (run_dir / RUN_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return {**record, "reused": False}


def describe(record: dict[str, Any]) -> str:
    """One line of where a recorded run ran: commit, date, CPU, load before -> after."""
    load = " -> ".join(_number(record.get(k), ".1f") for k in ("load_before", "load_after"))
    return (
        f"commit {record.get('commit', 'n/a')}, finished {record.get('finished', 'n/a')}, "
        f"CPU {record.get('cpu', 'n/a')}, load {load}"
    )


def run_entries(
    frameworks: Sequence[str], seeds: Sequence[int], minutes: float, extra: Sequence[str], runs: Path = RUNS
) -> list[dict[str, Any]]:
    """One row per (framework, seed), frameworks in the order given, each one's seeds in the order given."""
    rows = []
    for framework in frameworks:
        for seed in seeds:
            record = run(framework, seed, minutes, extra, runs)
            rows.append(row(run_dir_of(framework, seed, runs), record))
    return rows


def row(run_dir: Path, record: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The figures of one run from its summary.json, with the benchmark's record of it (read from the run directory
    when not given; a run made without the benchmark has none)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    if record is None:
        record = _read_record(run_dir)
    held = summary["held_out"]
    history = summary["history"]
    settings = summary.get("settings") or {}
    return {
        "framework": summary["framework"],
        "seed": settings.get("seed"),
        "minutes": (record.get("settings") or {}).get("minutes", settings.get("max_minutes")),
        "run_dir": run_dir.name,
        "steps": summary["steps"],
        "trained_steps": sum(1 for entry in history if entry.get("samples")),
        "before": held["before"],
        "after": held["after"],
        "without_tools": (held.get("without_tools_before") or {}).get("strict"),
        "drift": summary["drift"]["rate"],
        "continuations": summary["drift"]["continuations"],
        "tokens_ratio": summary["training_tokens"]["transition_over_trained"],
        "seconds": summary["mean_seconds_per_step"]["total"],
        "load": (record.get("load_before"), record.get("load_after", summary["load_average"][0])),
        "commit": record.get("commit", "n/a"),
        "package_tree": record.get("package_tree"),
        "cpu": record.get("cpu"),
        "finished": record.get("finished"),
        "reused": record.get("reused"),
    }


def _read_record(run_dir: Path) -> dict[str, Any]:
    try:
        found = json.loads((run_dir / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _gain(r: dict[str, Any]) -> float:
    return round(r["after"]["strict"] - r["before"]["strict"], 3)


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), 3) if known else None


def _rounded(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def seed_detail(r: dict[str, Any]) -> dict[str, Any]:
    """What a reader needs of one seed's run: its gain and tool use after training, and where and when it ran."""
    after = r["after"]
    return {
        "seed": r["seed"],
        "gain": _gain(r),
        "strict": [r["before"]["strict"], after["strict"]],
        "steps": r["steps"],
        "trained_steps": r["trained_steps"],
        "top_tool_share": _rounded(after.get("top_tool_share")),
        "tool_calls_by_name": after.get("tool_calls_by_name"),
        "strict_by_op": {op: _rounded(v) for op, v in (after.get("strict_by_op") or {}).items()} or None,
        "load": list(r["load"]),
        "cpu": r["cpu"],
        "commit": r["commit"],
        "package_tree": r["package_tree"],
        "finished": r["finished"],
        "run_dir": r["run_dir"],
    }


def by_framework(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each framework, frameworks in the order first met."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault(r["framework"], []).append(r)
    return grouped


def framework_figures(rows: list[dict[str, Any]]) -> list[Figure]:
    """Per framework, over its seeds: the mean strict held-out gain (met: mean >= +0.30, no seed below +0.15), the
    most-called tool's share of the held-out tool calls after training (highest seed), LLM calls per rollout after
    training (mean) and the drift rate (worst seed), against the targets."""
    found: list[Figure] = []
    for name, runs in by_framework(rows).items():
        found += _gain_figures(name, runs)
    return found


def _gain_figures(name: str, runs: list[dict[str, Any]]) -> list[Figure]:
    n = len(runs)
    gains = [_gain(r) for r in runs]
    mean, lowest, spread = round(statistics.fmean(gains), 3), min(gains), round(statistics.pstdev(gains), 3)
    before, after = _mean([r["before"]["strict"] for r in runs]), _mean([r["after"]["strict"] for r in runs])
    minutes = {r["minutes"] for r in runs}
    within = f", each run {minutes.pop():g} minutes" if len(minutes) == 1 and None not in minutes else ""
    over = "" if n == 1 else f", mean of {n} seeds, lowest {lowest:+.2f}"
    detail = {
        "seeds": [r["seed"] for r in runs],
        "n_seeds": n,
        "gains": gains,
        "min": lowest,
        "std": spread,
        "steps": runs[0]["steps"] if n == 1 else [r["steps"] for r in runs],
        "trained_steps": runs[0]["trained_steps"] if n == 1 else [r["trained_steps"] for r in runs],
        "seconds_per_step": _mean([r["seconds"] for r in runs]),
        "strict": [before, after],
        "without_tools": _mean([r["without_tools"] for r in runs]),
        "valid_tool_call": [_mean([r[k]["valid_tool_call"] for r in runs]) for k in ("before", "after")],
        "tokens_ratio": _mean([r["tokens_ratio"] for r in runs]),
        "per_seed": [seed_detail(r) for r in runs],
    }
    found = [
        Figure(
            key=f"calc.{name}.strict_gain",
            label=f"calculator agent, {name}: strict held-out gain ({before:.2f} -> {after:.2f}{over})",
            value=mean,
            unit="strict accuracy",
            target=f">= +{GAIN_TARGET:.2f} mean over the seeds, no seed below +{SEED_FLOOR:.2f}{within}",
            met=mean >= GAIN_TARGET and lowest >= SEED_FLOOR,
            detail=detail,
            rounds=gains,
        )
    ]
    shares = [r["after"].get("top_tool_share") for r in runs]
    known = [round(s, 3) for s in shares if s is not None]
    if known:  # none: every run predates the count, or made no tool call after training
        found.append(
            Figure(
                key=f"calc.{name}.top_tool_share",
                label=f"calculator agent, {name}: share of the held-out tool calls taken by the most-called tool after "
                f"training ({'the seed' if n == 1 else f'highest of {n} seeds'})",
                value=max(known),
                unit="share",
                target=f"< {TOP_TOOL_LIMIT:.2f}",
                met=max(known) < TOP_TOOL_LIMIT,
                higher_is_better=False,
                detail={
                    "per_seed": [_rounded(s) for s in shares],
                    "before": [_rounded(r["before"].get("top_tool_share")) for r in runs],
                    "tool_calls_by_name": [r["after"].get("tool_calls_by_name") for r in runs],
                },
                rounds=known,
            )
        )
    calls = [r["after"]["calls_per_rollout"] for r in runs]
    mean_calls = _mean(calls)
    assert mean_calls is not None
    found += [
        Figure(
            key=f"calc.{name}.calls_per_rollout",
            label=f"calculator agent, {name}: LLM calls per rollout after training"
            + ("" if n == 1 else f" (mean of {n} seeds)"),
            value=mean_calls,
            unit="calls",
            target=">= 2",
            met=mean_calls >= 2,
            detail={
                "before": _mean([r["before"]["calls_per_rollout"] for r in runs]),
                "per_seed": calls,
                "min": min(calls),
            },
            rounds=calls,
        ),
        Figure(
            key=f"calc.{name}.drift_rate",
            label=f"calculator agent, {name}: token drift rate through the proxy"
            + ("" if n == 1 else f" (worst of {n} seeds)"),
            value=max(r["drift"] for r in runs),
            unit="",
            target="0",
            met=all(r["drift"] == 0 for r in runs),
            higher_is_better=False,
            detail={"continuations": sum(r["continuations"] for r in runs), "per_seed": [r["drift"] for r in runs]},
            rounds=[r["drift"] for r in runs],
        ),
    ]
    return found


def _number(value: Optional[float], spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _pair(values: Sequence[Optional[float]]) -> str:
    return " -> ".join(_number(v, ".2f") for v in values)


def print_rows(rows: Sequence[dict[str, Any]]) -> None:
    print(
        "| framework | seed | steps (trained) | strict before -> after | strict after by kind | valid tool call "
        "| right tool and numbers | LLM calls per rollout | top tool share (calls by tool) | drift (continuations) "
        "| tokens, one sample per call / multi-turn | s/step | without tools | commit | CPU | load avg (before, after) |"
    )
    print("|---|---:|---:|---|---|---|---|---|---|---|---:|---:|---:|---|---|---|")
    for r in rows:
        b, a = r["before"], r["after"]
        by_op = ", ".join(f"{op} {v:.2f}" for op, v in (a.get("strict_by_op") or {}).items()) or "n/a"
        counts = ", ".join(f"{tool} {count}" for tool, count in (a.get("tool_calls_by_name") or {}).items())
        load = ", ".join(_number(v, ".1f") for v in r["load"])
        print(
            f"| {r['framework']} | {r['seed']} | {r['steps']} ({r['trained_steps']}) | {_pair((b['strict'], a['strict']))} "
            f"| {by_op} | {_pair((b['valid_tool_call'], a['valid_tool_call']))} "
            f"| {_pair((b['right_plan'], a['right_plan']))} | {_pair((b['calls_per_rollout'], a['calls_per_rollout']))} "
            f"| {_pair((b.get('top_tool_share'), a.get('top_tool_share')))} ({counts or 'n/a'}) "
            f"| {r['drift']:.3f} ({r['continuations']}) "
            f"| {r['tokens_ratio'] if r['tokens_ratio'] is not None else 'n/a'} | {r['seconds']:.1f} "
            f"| {_number(r['without_tools'], '.2f')} | {r['commit']} | {r['cpu'] or 'n/a'} | {load} |"
        )
    for name, runs in by_framework(rows).items():
        gains = [_gain(r) for r in runs]
        print(
            f"{name}: mean strict gain {statistics.fmean(gains):+.3f} over {len(gains)} seed(s) "
            f"(lowest {min(gains):+.2f}, std {statistics.pstdev(gains):.3f})"
        )


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frameworks", nargs="*", default=FRAMEWORKS, choices=FRAMEWORKS)
    parser.add_argument("--minutes", type=float, default=15.0)
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds, each its own run (default: 0)")
    seeds.add_argument("--seed", type=int, default=None, help="one seed (the same as --seeds S)")
    parser.add_argument("--from-runs", nargs="*", default=None, help="print these run directories instead")
    parser.add_argument("extra", nargs="*", help="further train.py options, after --")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    args.seeds = args.seeds if args.seeds is not None else [0 if args.seed is None else args.seed]
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds needs distinct seeds, got {args.seeds}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    if args.from_runs:
        rows = [row(Path(path)) for path in args.from_runs]
    else:
        rows = run_entries(args.frameworks, args.seeds, args.minutes, args.extra)
    print()
    print_rows(rows)
    print(f"load average now: {load_average()}")
    settings = None if args.from_runs else {"seeds": args.seeds, "minutes": args.minutes, "train_options": args.extra}
    write_results(args.json, framework_figures(rows), extra=settings)


if __name__ == "__main__":
    main()
