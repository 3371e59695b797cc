"""Two agents trained in one run, one LoRA adapter each: each agent's held-out reward before and after.

Runs `examples/multi_agent/train.py` (a solver and a reviewer of answers balanced between right and wrong ones, each
with its own reward; GRPO with `agent_match=["solver", "reviewer"]` on SmolLM2-135M-Instruct, the example's defaults)
for `--minutes` and reports each agent's held-out gain (target: each +0.2 over its untrained value in 15 minutes),
with the reviewer's held-out accuracy per kind of input (right / wrong answers; saying "yes" to everything scores 0.5
overall) and the solver's strict accuracy before and after.

Usage:
    python benchmarks/multi_agent_adapters.py [--minutes 15] [--run-dir runs/bench-multi-agent] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, add_json_argument, write_results

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "multi_agent"
TARGET = 0.2


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/bench-multi-agent"))
    parser.add_argument("--seed", type=int, default=0)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    shutil.rmtree(args.run_dir, ignore_errors=True)  # a fresh run: resuming would mix two runs' figures
    sys.path.insert(0, str(EXAMPLE))
    spec = importlib.util.spec_from_file_location("multi_agent_train", EXAMPLE / "train.py")
    assert spec is not None and spec.loader is not None
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    train.main(["--minutes", str(args.minutes), "--run-dir", str(args.run_dir), "--seed", str(args.seed)])
    summary = json.loads((args.run_dir / "summary.json").read_text())
    figures = []
    for agent, result in summary["agents"].items():
        gain = result["gain"]
        figures.append(
            Figure(
                key=f"grpo.multi_agent.{agent}_gain",
                label=f"Two adapters in one run: the {agent}'s held-out reward gain in {args.minutes:g} minutes",
                value=gain if gain is not None else float("nan"),
                unit="held-out reward gain",
                target=f">= +{TARGET}",
                met=gain is not None and gain >= TARGET,
                detail={
                    "before": result["held_out_before"],
                    "after": result["held_out_after"],
                    "steps": summary["steps"],
                    "solver_strict_accuracy": summary["solver_strict_accuracy"],
                    "reviewer_accuracy": summary.get("reviewer_accuracy"),
                    "seed": args.seed,
                },
            )
        )
    write_results(args.json, figures)
    return summary


if __name__ == "__main__":
    main()
