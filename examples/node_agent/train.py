"""Train the JavaScript agent (agent.mjs, the `openai` npm package) with GRPO, unchanged: Agent Lightning runs it
as a program once per rollout (`CommandAgent`), hands it its per-rollout model URL through the LLM proxy (which
records every call with its exact token ids) and reads the reward it prints.

    python examples/node_agent/train.py                      # 10 minutes on SmolLM2-135M-Instruct (CPU)
    python examples/node_agent/train.py --tiny --max-steps 1 --run-dir /tmp/node   # smoke test, tiny random model

The task: "What is the capital of <country>?" with one tool, `capital_of(country)`; a rollout that goes right is
two LLM calls (the tool call, then the answer) with the tool's result between them. Held-out countries are never
trained on. Needs Node.js 18 or newer; the script runs `npm install` in this folder the first time. The run
directory gets summary.json, reward_curve.png, accuracy.png, the store, checkpoints and the trained model.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.report import write_summary
from agentlightning.litagent.command import CommandAgent

HERE = Path(__file__).resolve().parent
EXAMPLES = ("Japan", "Kenya")  # the worked examples in agent.mjs: never a task
MAX_TOKENS = 48


def tasks(n_held_out: int = 20, seed: int = 0) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(training tasks, held-out tasks): every country of capitals.json but the worked examples, split by country."""
    capitals = json.loads((HERE / "capitals.json").read_text())
    items = [{"country": c, "capital": capitals[c]} for c in sorted(capitals) if c not in EXAMPLES]
    random.Random(seed).shuffle(items)
    return items[n_held_out:], items[:n_held_out]


def ensure_node_packages() -> str:
    """The `node` executable, after installing agent.mjs's npm packages if they are missing; a clear exit if Node.js
    is not installed."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("This example needs Node.js 18 or newer (`node` on the PATH): e.g. apt-get install nodejs npm")
    if not (HERE / "node_modules" / "openai").is_dir():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("npm is needed once, to install the agent's `openai` package: e.g. apt-get install npm")
        print("installing the agent's npm packages (npm install, once)...", file=sys.stderr)
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)
    return node


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="training time budget (default 10)")
    parser.add_argument("--run-dir", default="runs/node-agent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runners", type=int, default=4, help="runner processes (default 4)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--tasks-per-step", type=int, default=4)
    parser.add_argument("--held-out", type=int, default=20)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--fresh", action="store_true", help="delete the run directory first instead of resuming")
    parser.add_argument("--tiny", action="store_true", help="a tiny random model instead of SmolLM2 (smoke tests)")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parse_args(argv)
    node = ensure_node_packages()
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    agl.setup_logging("WARNING")
    logging.getLogger("agentlightning.algorithm.grpo").setLevel(logging.INFO)
    if args.tiny:
        from agentlightning.inference.tiny import build_tiny_engine

        engine = build_tiny_engine(seed=args.seed)
    else:
        from agentlightning.inference.engine import InferenceEngine

        engine = InferenceEngine.from_default()
    train, held_out = tasks(args.held_out)
    agent = CommandAgent([node, str(HERE / "agent.mjs")], timeout=300)
    algorithm = GRPO(
        engine=engine,
        output_dir=run_dir,
        group_size=args.group_size,
        tasks_per_step=args.tasks_per_step,
        lora_rank=16,
        learning_rate=3e-4,
        max_minutes=args.minutes,
        max_steps=args.max_steps,
        max_response_tokens=MAX_TOKENS,
        temperature=0.7,
        seed=args.seed,
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=args.runners, store=f"sqlite:///{run_dir / 'store.db'}")
    started = time.monotonic()
    trainer.fit(agent, train, val_dataset=held_out)
    return report(args, run_dir, algorithm, time.monotonic() - started)


def report(args: argparse.Namespace, run_dir: Path, algorithm: GRPO, wall: float) -> dict[str, Any]:
    """Extend the summary.json GRPO wrote (with the plots and final_model/) with this example's fields."""
    grpo_summary = algorithm.summary()
    reports = grpo_summary["evaluations"]
    accuracy = {label: (reports.get(label) or {}).get("mean_reward") for label in ("before", "after")}
    summary = {
        "agent": "examples/node_agent/agent.mjs (JavaScript, openai npm package), run by CommandAgent",
        "model": "tiny random model" if args.tiny else "SmolLM2-135M-Instruct (Q4_1 GGUF, de-quantized to float32)",
        "held_out_accuracy": accuracy,
        "gain": None if None in accuracy.values() else round(accuracy["after"] - accuracy["before"], 4),  # type: ignore[operator]
        "wall_seconds": round(wall, 1),
        "load_average": os.getloadavg(),
        **grpo_summary,
    }
    write_summary(run_dir / "summary.json", summary)
    print(f"held-out accuracy {accuracy['before']} -> {accuracy['after']} after {algorithm.step} GRPO steps; {run_dir}")
    return summary


if __name__ == "__main__":
    main()
