"""Seconds per GRPO step of the calculator agent, by part, at this checkout and at a baseline commit, side by side.

    python benchmarks/calc_step_time.py                                   # f474d5a vs this checkout, seeds 0 1, 6 steps
    python benchmarks/calc_step_time.py --baseline f474d5a --seeds 0 --steps 4
    python benchmarks/calc_step_time.py --current-options="--runners 16"  # train.py options of this checkout's side

Each (side, seed) runs `examples/calc_agent/train.py --framework F --fresh --seed S --max-steps N --held-out H
--no-live` of its own code into `runs/bench-steptime/<side>-seed<S>`: this checkout's, and the baseline commit's
from a detached git worktree (`runs/bench-steptime/trees/<commit>`, put first on PYTHONPATH so that its package is
the one imported, with this checkout's virtual environment). The sides alternate run by run (baseline first for
seed 0, this checkout first for seed 1, ...), so a change of the machine's load falls on both. Both sides get the
options in `--options` (default: the calculator example's training settings written out, so that a default changed
since the baseline does not make the sides train different things); the number of runner processes is each side's
own default (what a user of that commit gets; recorded per run). `--current-options` go to this checkout's side only
(a setting the baseline does not have).

From each run's summary.json history: every step's seconds by part (rollout, adapter, update, weight_swap, total),
its rollouts, samples and sample tokens. The first step is left out of the means (its requests find no kept prompt
prefix and the allocators warm up). Prints per side: mean seconds per step and by part, rollout seconds per rollout,
update seconds per thousand sample tokens; `--json PATH` writes the mean step time of this checkout with the
baseline as the peer (target: half the baseline's, the training issue's "halve the step time"), the per-part means
and the normalised figures in the detail, the load average before and after each run and the CPU.

A step's work is not fixed: dynamic sampling draws more tasks when few groups are informative, and the model's
replies get longer or shorter as it learns, so the normalised figures (per rollout, per sample token) say whether a
difference in step time is the code or the step's contents.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Figure, Peer, add_json_argument, load_average, write_results  # noqa: E402

PARTS = ("rollout", "adapter", "update", "weight_swap", "total")
DEFAULT_OPTIONS = "--group-size 4 --tasks-per-step 4 --max-tasks-per-step 8 --temperature 0.7 --lora-rank 16"
RUNS = ROOT / "runs" / "bench-steptime"


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="f474d5a", help="the commit to compare with (default f474d5a)")
    parser.add_argument("--framework", default="openai", help="the calculator agent's framework (default openai)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds, one run per side each")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per run (default 6; the first is not timed)")
    parser.add_argument("--held-out", type=int, default=4, help="held-out questions per run (default 4)")
    parser.add_argument("--options", default=DEFAULT_OPTIONS, help="train.py options of both sides")
    parser.add_argument("--current-options", default="", help="train.py options of this checkout's side only")
    parser.add_argument("--tiny", action="store_true", help="the tiny random model (the smoke test)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take (default 1800)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2: the first step is not timed")
    return args


def baseline_tree(commit: str) -> Path:
    """A detached worktree of `commit` (made once; reused when it is already there at that commit)."""
    full = subprocess.run(
        ["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if full.returncode != 0:
        raise SystemExit(f"calc_step_time: {commit!r} is not a commit of this repository: {full.stderr.strip()}")
    sha = full.stdout.strip()
    tree = RUNS / "trees" / sha[:12]
    if (tree / ".git").exists():
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True).stdout.strip()
        if head == sha:
            return tree
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    tree.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT, check=True, capture_output=True)
    return tree


def run_side(tree: Path, side: str, seed: int, args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    """One training run of `tree`'s calculator example; its summary and the load around it."""
    run_dir = RUNS / f"{side}-seed{seed}"
    command = [
        sys.executable,
        str(tree / "examples" / "calc_agent" / "train.py"),
        "--framework", args.framework,
        "--fresh",
        "--no-live",
        "--seed", str(seed),
        "--max-steps", str(args.steps),
        "--minutes", "600",
        "--held-out", str(args.held_out),
        "--run-dir", str(run_dir),
        *shlex.split(args.options),
        *extra,
        *(["--tiny"] if args.tiny else []),
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    before = load_average()
    print(f"[{side} seed {seed}] {shlex.join(command[1:])}", flush=True)
    result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=args.timeout)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise SystemExit(f"calc_step_time: the {side} run of seed {seed} failed ({result.returncode}):\n{tail}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"summary": summary, "load": [before, load_average()], "run_dir": str(run_dir.relative_to(ROOT))}


def step_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """Per-part mean seconds of the timed steps (all but the first) and the normalised figures."""
    history = summary.get("history") or []  # both commits' train.py write it at the top level
    timed = [entry for entry in history if "seconds" in entry and entry.get("step", 0) > 1]
    if not timed:
        raise SystemExit("calc_step_time: a run recorded no timed step after the first")
    parts = {part: statistics.fmean(entry["seconds"][part] for entry in timed) for part in PARTS}
    rollouts = sum(entry.get("rollouts", 0) for entry in timed)
    tokens = sum(entry.get("sample_tokens", 0) for entry in timed)
    return {
        "runners": summary.get("runners"),
        "steps": len(timed),
        "seconds": {part: round(value, 3) for part, value in parts.items()},
        "rollouts_per_step": round(rollouts / len(timed), 2),
        "samples_per_step": round(sum(entry.get("samples", 0) for entry in timed) / len(timed), 2),
        "rollout_seconds_per_rollout": round(sum(e["seconds"]["rollout"] for e in timed) / max(rollouts, 1), 3),
        "update_seconds_per_1k_tokens": round(1000 * sum(e["seconds"]["update"] for e in timed) / max(tokens, 1), 3),
    }


def mean_of(runs: list[dict[str, Any]], key: str, part: Optional[str] = None) -> float:
    values = [run["figures"][key][part] if part else run["figures"][key] for run in runs]
    return round(statistics.fmean(values), 3)


def side_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "seconds": {part: mean_of(runs, "seconds", part) for part in PARTS},
        "rollouts_per_step": mean_of(runs, "rollouts_per_step"),
        "samples_per_step": mean_of(runs, "samples_per_step"),
        "rollout_seconds_per_rollout": mean_of(runs, "rollout_seconds_per_rollout"),
        "update_seconds_per_1k_tokens": mean_of(runs, "update_seconds_per_1k_tokens"),
        "per_seed": [
            {"seed": run["seed"], **run["figures"], "load": run["load"], "run_dir": run["run_dir"]} for run in runs
        ],
    }


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    tree = baseline_tree(args.baseline)
    sides = {"baseline": (tree, []), "current": (ROOT, shlex.split(args.current_options))}
    results: dict[str, list[dict[str, Any]]] = {"baseline": [], "current": []}
    for index, seed in enumerate(args.seeds):
        order = ["baseline", "current"] if index % 2 == 0 else ["current", "baseline"]
        for side in order:
            side_tree, extra = sides[side]
            run = run_side(side_tree, side, seed, args, extra)
            figures = step_figures(run["summary"])
            results[side].append({"seed": seed, "figures": figures, "load": run["load"], "run_dir": run["run_dir"]})
            print(f"[{side} seed {seed}] {json.dumps(figures)} load {run['load']}", flush=True)
    summary = {side: side_summary(runs) for side, runs in results.items()}
    for side, figures in summary.items():
        seconds = figures["seconds"]
        print(
            f"{side:9s} {seconds['total']:6.1f} s/step  (rollout {seconds['rollout']:.1f}, update {seconds['update']:.1f},"
            f" swap {seconds['weight_swap']:.1f}, adapter {seconds['adapter']:.2f}); "
            f"{figures['rollouts_per_step']:.1f} rollouts and {figures['samples_per_step']:.1f} samples a step; "
            f"{figures['rollout_seconds_per_rollout']:.2f} s per rollout, "
            f"{figures['update_seconds_per_1k_tokens']:.2f} update s per 1k sample tokens"
        )
    current, baseline = summary["current"]["seconds"]["total"], summary["baseline"]["seconds"]["total"]
    ratio = baseline / current if current else float("nan")
    print(f"step time: {current:.1f} s against {baseline:.1f} s at {args.baseline} ({ratio:.2f}x)")
    if args.json:
        short = args.baseline[:7]
        settings = {
            "framework": args.framework,
            "seeds": args.seeds,
            "steps": args.steps,
            "options": args.options,
            "current_options": args.current_options,
            "baseline": args.baseline,
        }
        figure = Figure(
            key=f"calc.step_time.{args.framework}",
            label=(
                f"calculator agent ({args.framework}), seconds per GRPO step (mean of steps 2-{args.steps}, "
                f"{len(args.seeds)} seeds; rollout {summary['current']['seconds']['rollout']:.1f} s, update "
                f"{summary['current']['seconds']['update']:.1f} s)"
            ),
            value=round(current, 1),
            unit="s per step",
            target=f"<= half of {short}'s (measured side by side in one run)",
            met=ratio >= 2.0,
            higher_is_better=False,
            peer=Peer(f"{short}", round(baseline, 1)),
            detail={"settings": settings, **summary},
            rounds=[run["figures"]["seconds"]["total"] for run in results["current"]],
        )
        write_results(args.json, [figure], script="calc_step_time.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
