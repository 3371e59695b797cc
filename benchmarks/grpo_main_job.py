"""The main job's figures: held-out accuracy before/after and seconds per GRPO step, over seeds.

    .venv/bin/python benchmarks/grpo_main_job.py --seeds 0 1 2 --minutes 12     # runs the main job per seed
    .venv/bin/python benchmarks/grpo_main_job.py --from-runs runs/main-seed0     # prints existing runs' figures
    .venv/bin/python benchmarks/grpo_main_job.py --seeds 0 --compare-sampling    # with and without sampling for
                                                                                 # informative groups, alternately

Each seed runs `examples/arithmetic_rl/train.py --fresh --seed S --run-dir runs/bench-seedS --minutes M` (the command
behind `bash scripts/train.sh`) and the figures are read from its summary.json. Prints one row per run, the mean,
and the 1-minute load average before and after each run (the machine is shared: figures under load are
preliminary). `--json PATH` writes each run's strict held-out gain against the target (+0.30 in 12 minutes) and
the mean over seeds (benchmarks/_results.py); with `--compare-sampling`, the run without sampling for informative
groups is the peer of the run with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Figure, Peer, add_json_argument, write_results  # noqa: E402


def run_seed(seed: int, minutes: float, runners: int, informative_groups: int | None = None) -> tuple[Path, float]:
    suffix = "" if informative_groups is None else f"-ig{informative_groups}"
    run_dir = ROOT / "runs" / f"bench-seed{seed}{suffix}"
    load_before = os.getloadavg()[0]
    command = [
        sys.executable,
        str(ROOT / "examples" / "arithmetic_rl" / "train.py"),
        "--fresh",
        "--no-live",
        "--seed",
        str(seed),
        "--minutes",
        str(minutes),
        "--runners",
        str(runners),
        "--run-dir",
        str(run_dir),
    ]
    if informative_groups is not None:
        command += ["--informative-groups", str(informative_groups)]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)
    return run_dir, load_before


def row(run_dir: Path, load_before: float | None) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text())
    acc = summary["held_out_accuracy"]
    history = summary.get("history", [])
    return {
        "run": run_dir.name,
        "seed": summary["settings"]["seed"],
        "steps": summary["steps"],
        "trained_steps": sum(1 for entry in history if entry.get("samples")),
        "strict": (acc["before"]["strict"], acc["after"]["strict"]),
        "lenient": (acc["before"]["lenient"], acc["after"]["lenient"]),
        "seconds": summary["mean_seconds_per_step"],
        "load": (load_before, summary["load_average"][0]),
        "wall_seconds": summary.get("wall_seconds"),
    }


def _gain(r: dict[str, Any]) -> float:
    return round(r["strict"][1] - r["strict"][0], 3)


def gain_figures(rows: list[dict[str, Any]], compare_sampling: bool) -> list[Figure]:
    """Strict held-out gain per run (target +0.30), their mean; with --compare-sampling, with against without."""
    if compare_sampling:
        pairs = [(rows[i], rows[i + 1]) for i in range(0, len(rows) - 1, 2)]  # (without, with) per seed
        return [
            Figure(
                key=f"grpo.main_job.sampling.seed{with_['seed']}.strict_gain",
                label=f"no wasted steps: main job, seed {with_['seed']}, strict gain with sampling for informative groups",
                value=_gain(with_),
                unit="strict accuracy",
                target="higher than without",
                met=_gain(with_) > _gain(without),
                peer=Peer("without the sampling", _gain(without)),
                detail={
                    "steps": with_["steps"],
                    "trained_steps": with_["trained_steps"],
                    "peer_steps": without["steps"],
                },
            )
            for without, with_ in pairs
        ]
    found = [
        Figure(
            key=f"grpo.main_job.seed{r['seed']}.strict_gain",
            label=f"GRPO main job, seed {r['seed']}: strict held-out gain ({r['strict'][0]:.2f} -> {r['strict'][1]:.2f})",
            value=_gain(r),
            unit="strict accuracy",
            target=">= +0.30 in 12 minutes",
            met=_gain(r) >= 0.30,
            detail={
                "steps": r["steps"],
                "trained_steps": r["trained_steps"],
                "wall_seconds": r["wall_seconds"],
                "seconds_per_step": r["seconds"],
            },
        )
        for r in rows
    ]
    if len(rows) > 1:
        gains = [_gain(r) for r in rows]
        found.append(
            Figure(
                key="grpo.main_job.mean_strict_gain",
                label=f"GRPO main job: mean strict held-out gain over {len(rows)} seeds",
                value=round(statistics.fmean(gains), 3),
                unit="strict accuracy",
                target=">= +0.30 in 12 minutes",
                met=statistics.fmean(gains) >= 0.30,
                detail={"seeds": [r["seed"] for r in rows], "min": min(gains), "max": max(gains)},
                rounds=gains,
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument("--from-runs", nargs="*", default=None, help="print these run directories instead")
    parser.add_argument(
        "--compare-sampling",
        action="store_true",
        help="per seed, a run without sampling for informative groups (--informative-groups 0), then one with it",
    )
    add_json_argument(parser)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    if args.from_runs:
        rows = [row(Path(path), None) for path in args.from_runs]
    else:
        for seed in args.seeds:
            for informative in (0, None) if args.compare_sampling else (None,):
                run_dir, load_before = run_seed(seed, args.minutes, args.runners, informative)
                rows.append(row(run_dir, load_before))
    print()
    print(
        "| run | seed | steps (trained) | strict before -> after | lenient before -> after | s/step rollout | adapter "
        "| update | weight swap | total | load avg (before, after) |"
    )
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        s = r["seconds"]
        load = ", ".join("n/a" if v is None else f"{v:.1f}" for v in r["load"])
        print(
            f"| {r['run']} | {r['seed']} | {r['steps']} ({r['trained_steps']}) "
            f"| {r['strict'][0]:.2f} -> {r['strict'][1]:.2f} "
            f"| {r['lenient'][0]:.2f} -> {r['lenient'][1]:.2f} | {s['rollout']:.1f} | {s['adapter']:.2f} "
            f"| {s['update']:.1f} | {s['weight_swap']:.2f} | {s['total']:.1f} | {load} |"
        )
    if len(rows) > 1:
        gain = [r["strict"][1] - r["strict"][0] for r in rows]
        print(
            f"\nmean strict gain {statistics.fmean(gain):+.3f} over {len(rows)} runs (min {min(gain):+.2f}, max {max(gain):+.2f})"
        )
    print(f"load average now: {os.getloadavg()}")
    write_results(args.json, gain_figures(rows, args.compare_sampling and not args.from_runs))


if __name__ == "__main__":
    main()
