"""Train the compacting agent (compacting.py: a sub-agent with a fresh conversation, a summary after each turn of the
main conversation) with GRPO on this machine's CPU, and report how its calls joined into lineages.

    python examples/compacting_agent/train.py --minutes 5                     # SmolLM2-135M-Instruct
    python examples/compacting_agent/train.py --tiny --max-steps 1 --run-dir /tmp/compact   # smoke test

The real pieces, as in examples/calc_agent/train.py: a SQLite store in the run directory, runner processes, the local
inference server, the LLM proxy recording every call with its exact token ids, GRPO with multi-turn samples. A
rollout's calls form lineages (the helper's conversation, the main conversation up to its summary call, the one
resumed from the summary); each is trained as one sample, the summary included. summary.json has the run's
`lineages` (lineages per rollout, calls that fitted no lineage, share of the generated tokens trained) and `drift`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compacting

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.report import plot_rewards, training_summary, write_summary

logger = logging.getLogger("compacting_agent")

TRAIN_TASKS = 200


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="training time budget (default 5)")
    parser.add_argument("--run-dir", default="runs/compacting", help="run directory (default runs/compacting)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runners", type=int, default=4, help="runner processes (default 4)")
    parser.add_argument("--group-size", type=int, default=4, help="rollouts per task (default 4)")
    parser.add_argument("--tasks-per-step", type=int, default=2, help="informative groups per step (default 2)")
    parser.add_argument("--max-tasks-per-step", type=int, default=4, help="sampling bound per step (default 4)")
    parser.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default 0.7)")
    parser.add_argument(
        "--truncated",
        choices=["mask", "keep", "failure_reward"],
        default="mask",
        help="calls that stopped on the length limit (GRPO's `truncated`, default mask)",
    )
    parser.add_argument("--held-out", type=int, default=20, help="held-out tasks answered before and after (0: none)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--fresh", action="store_true", help="delete the run directory first instead of resuming")
    parser.add_argument("--tiny", action="store_true", help="a tiny random model instead of SmolLM2 (smoke tests)")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _configure_logging(run_dir)
    if args.tiny:
        from agentlightning.inference.tiny import build_tiny_engine

        engine = build_tiny_engine(seed=args.seed)
    else:
        from agentlightning.inference.engine import InferenceEngine

        engine = InferenceEngine.from_default()
    tasks = compacting.make_tasks(TRAIN_TASKS + args.held_out, seed=args.seed)
    train, held_out = tasks[:TRAIN_TASKS], tasks[TRAIN_TASKS:]
    algorithm = GRPO(
        engine=engine,
        output_dir=run_dir,
        group_size=args.group_size,
        tasks_per_step=args.tasks_per_step,
        max_tasks_per_step=args.max_tasks_per_step,
        max_minutes=args.minutes,
        max_steps=args.max_steps,
        max_response_tokens=compacting.SUMMARY_TOKENS,
        temperature=args.temperature,
        truncated=args.truncated,
        seed=args.seed,
    )
    # The Trainer's progress: a live panel of the rollouts and GRPO's steps on a terminal, log lines otherwise.
    trainer = agl.Trainer(algorithm=algorithm, n_runners=args.runners, store=f"sqlite:///{run_dir / 'store.db'}")
    started = time.monotonic()
    trainer.fit(compacting.compacting_agent, train, val_dataset=held_out or None)
    return report(args, run_dir, algorithm, time.monotonic() - started)


def _configure_logging(run_dir: Path) -> None:
    """Warnings on the console; every step's line and every warning in train.log."""
    agl.setup_logging("WARNING")
    logging.getLogger("agentlightning.algorithm.grpo").setLevel(logging.INFO)
    file_handler = logging.FileHandler(run_dir / "train.log")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("agentlightning").addHandler(file_handler)


def _held_out(algorithm: GRPO, label: str) -> dict[str, Any]:
    """The `label` evaluation's accuracy (replies exactly right) and its tasks whose rollout did not finish in time
    (counted as wrong in the accuracy); None for both when that evaluation did not run."""
    for evaluation in algorithm.evaluations:
        if evaluation.label == label:
            items = evaluation.items
            right = sum(1 for item in items if item.get("reward") == 1.0)
            return {"accuracy": right / len(items) if items else None, "unfinished": evaluation.unfinished}
    return {"accuracy": None, "unfinished": None}


def report(args: argparse.Namespace, run_dir: Path, algorithm: GRPO, wall: float) -> dict[str, Any]:
    """Write summary.json and reward_curve.png; print the lineage figures."""
    held_out = {label: _held_out(algorithm, label) for label in ("before", "after")}
    summary = {
        "model": "tiny random model" if args.tiny else "SmolLM2-135M-Instruct (Q4_1 GGUF, de-quantized to float32)",
        "task": "a times b plus c: the product by a sub-agent, a summary after every "
        f"{compacting.COMPACT_EVERY} turn(s) of the main conversation; reward: the reply is exactly the number",
        "wall_seconds": round(wall, 1),
        "load_average": os.getloadavg(),
        "held_out_accuracy": {label: figures["accuracy"] for label, figures in held_out.items()},
        "held_out_unfinished": {label: figures["unfinished"] for label, figures in held_out.items()},
        **training_summary(algorithm),
        "store": str(run_dir / "store.db"),
    }
    plot_rewards(algorithm.history, run_dir / "reward_curve.png")
    write_summary(run_dir / "summary.json", summary)
    lineages = summary["lineages"]
    print(
        f"\n{algorithm.step} GRPO steps in {wall:.0f}s: {lineages['lineages_per_rollout']} lineages per rollout, "
        f"{lineages['calls_fitting_no_lineage']} calls fitting no lineage (drift {summary['drift']['rate']}), "
        f"generated tokens trained: {lineages['trained_share']}; held-out accuracy "
        f"{summary['held_out_accuracy']['before']} -> {summary['held_out_accuracy']['after']}"
    )
    print(f"Run directory: {run_dir} (summary.json, reward_curve.png, train.log, store.db)")
    return summary


if __name__ == "__main__":
    main()
