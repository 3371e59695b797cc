"""The calculator agent trained in each framework: held-out accuracy and tool use before/after, same task and seed.

    .venv/bin/python benchmarks/calc_frameworks.py --minutes 15                          # all four, one after another
    .venv/bin/python benchmarks/calc_frameworks.py --frameworks langgraph --minutes 15
    .venv/bin/python benchmarks/calc_frameworks.py --from-runs runs/bench-calc-langgraph  # print existing runs

Each framework runs `examples/calc_agent/train.py --framework F --fresh --seed S --minutes M` (the command behind
`bash scripts/train.sh calc`) into `runs/bench-calc-F`, and its figures are read from its summary.json. Prints one
row per run with the commit and the 1-minute load average before and after it (the machine is shared: a row under
load is preliminary). `--json PATH` writes per framework the strict held-out gain (target +0.30 in 15 minutes), the
LLM calls per rollout after training (target >= 2) and the drift rate (target 0) through benchmarks/_results.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Figure, add_json_argument, write_results  # noqa: E402

FRAMEWORKS = ["langgraph", "openai", "agents-sdk", "autogen"]


def run(framework: str, minutes: float, seed: int, extra: list[str]) -> tuple[Path, float]:
    run_dir = ROOT / "runs" / f"bench-calc-{framework}"
    load_before = os.getloadavg()[0]
    command = [
        sys.executable, str(ROOT / "examples" / "calc_agent" / "train.py"), "--framework", framework, "--fresh",
        "--no-live", "--seed", str(seed), "--minutes", str(minutes), "--run-dir", str(run_dir), *extra,
    ]  # fmt: skip
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)
    return run_dir, load_before


def row(run_dir: Path, load_before: Optional[float], commit: str) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text())
    held = summary["held_out"]
    history = summary["history"]
    return {
        "framework": summary["framework"],
        "steps": summary["steps"],
        "trained_steps": sum(1 for entry in history if entry.get("samples")),
        "before": held["before"],
        "after": held["after"],
        "without_tools": (held.get("without_tools_before") or {}).get("strict"),
        "drift": summary["drift"]["rate"],
        "continuations": summary["drift"]["continuations"],
        "tokens_ratio": summary["training_tokens"]["transition_over_trained"],
        "seconds": summary["mean_seconds_per_step"]["total"],
        "load": (load_before, summary["load_average"][0]),
        "commit": commit,
    }


def framework_figures(rows: list[dict[str, Any]]) -> list[Figure]:
    """Per framework: strict held-out gain, LLM calls per rollout after training, drift rate, against the targets."""
    found = []
    for r in rows:
        name, before, after = r["framework"], r["before"], r["after"]
        gain = round(after["strict"] - before["strict"], 3)
        detail = {"steps": r["steps"], "trained_steps": r["trained_steps"], "seconds_per_step": r["seconds"],
                  "strict": [before["strict"], after["strict"]], "without_tools": r["without_tools"],
                  "valid_tool_call": [before["valid_tool_call"], after["valid_tool_call"]],
                  "tokens_ratio": r["tokens_ratio"]}  # fmt: skip
        found += [
            Figure(
                key=f"calc.{name}.strict_gain",
                label=f"calculator agent, {name}: strict held-out gain ({before['strict']:.2f} -> {after['strict']:.2f})",
                value=gain,
                unit="strict accuracy",
                target=">= +0.30 in 15 minutes",
                met=gain >= 0.30,
                detail=detail,
            ),
            Figure(
                key=f"calc.{name}.calls_per_rollout",
                label=f"calculator agent, {name}: LLM calls per rollout after training",
                value=after["calls_per_rollout"],
                unit="calls",
                target=">= 2",
                met=after["calls_per_rollout"] >= 2,
                detail={"before": before["calls_per_rollout"]},
            ),
            Figure(
                key=f"calc.{name}.drift_rate",
                label=f"calculator agent, {name}: token drift rate through the proxy",
                value=r["drift"],
                unit="",
                target="0",
                met=r["drift"] == 0,
                higher_is_better=False,
                detail={"continuations": r["continuations"]},
            ),
        ]
    return found


def _pair(values: tuple[Optional[float], Optional[float]]) -> str:
    return " -> ".join("n/a" if v is None else f"{v:.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frameworks", nargs="*", default=FRAMEWORKS, choices=FRAMEWORKS)
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--from-runs", nargs="*", default=None, help="print these run directories instead")
    parser.add_argument("extra", nargs="*", help="further train.py options, after --")
    add_json_argument(parser)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    rows = []
    if args.from_runs:
        rows = [row(Path(path), None, "n/a") for path in args.from_runs]
    else:
        for framework in args.frameworks:
            run_dir, load_before = run(framework, args.minutes, args.seed, args.extra)
            rows.append(row(run_dir, load_before, commit.stdout.strip()))
    print()
    print(
        "| framework | steps (trained) | strict before -> after | valid tool call | right tool and numbers "
        "| LLM calls per rollout | drift (continuations) | tokens, one sample per call / multi-turn | s/step "
        "| without tools | commit | load avg (before, after) |"
    )
    print("|---|---:|---|---|---|---|---|---:|---:|---:|---|---|")
    for r in rows:
        b, a = r["before"], r["after"]
        load = ", ".join("n/a" if v is None else f"{v:.1f}" for v in r["load"])
        print(
            f"| {r['framework']} | {r['steps']} ({r['trained_steps']}) | {_pair((b['strict'], a['strict']))} "
            f"| {_pair((b['valid_tool_call'], a['valid_tool_call']))} | {_pair((b['right_plan'], a['right_plan']))} "
            f"| {_pair((b['calls_per_rollout'], a['calls_per_rollout']))} | {r['drift']:.3f} ({r['continuations']}) "
            f"| {r['tokens_ratio'] if r['tokens_ratio'] is not None else 'n/a'} | {r['seconds']:.1f} "
            f"| {'n/a' if r['without_tools'] is None else format(r['without_tools'], '.2f')} | {r['commit']} "
            f"| {load} |"
        )
    print(f"load average now: {os.getloadavg()}")
    write_results(args.json, framework_figures(rows))


if __name__ == "__main__":
    main()
