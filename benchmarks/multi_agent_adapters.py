"""Two agents trained in one run, one LoRA adapter each: each agent's held-out reward before and after.

Runs `examples/multi_agent/train.py` (a solver and a reviewer of answers balanced between right and wrong ones, each
with its own reward; GRPO with `agent_match=["solver", "reviewer"]` on SmolLM2-135M-Instruct, the example's defaults)
for `--minutes` and reports each agent's held-out gain (target: each +0.2 over its untrained value in 15 minutes;
the solver's in its reward, the reviewer's in its share of correct reviews, `team.correct_review`, which is what its
reward was until it was shaped), with the reviewer's held-out accuracy per kind of input (right / wrong answers) and the solver's strict accuracy
before and after. Half of the reviewer's tasks show a right answer and half a wrong one, so a constant verdict
("yes" to everything) scores exactly 0.5: the reviewer's target is met only when its accuracy after training is
above that base rate too (an untrained reviewer that mostly fails to answer "yes" or "no" gains +0.3 by learning to
say "yes" every time, which is not reviewing).

`--rejudge RESULT.json` applies this verdict rule to a result file written before it existed (its figures, commit,
date and load stay those of the run; the file records which rule re-judged it).

Usage:
    python benchmarks/multi_agent_adapters.py [--minutes 15] [--run-dir runs/bench-multi-agent] [--json PATH]
    python benchmarks/multi_agent_adapters.py --group-size 4 --tasks-per-step 4   # more, smaller groups
    python benchmarks/multi_agent_adapters.py --rejudge runs/benchmarks/<UTC time>/multi_agent_adapters.json
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

from _results import Figure, add_json_argument, current_commit, write_results

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "multi_agent"
TARGET = 0.2
BASE_RATE = 0.5  # the reviewer's accuracy with a constant verdict: half the tasks show a right answer
VERDICT_RULE = f"the reviewer's accuracy after training must also beat the {BASE_RATE} of a constant verdict"


def target_of(agent: str) -> str:
    """The target an agent's gain figure states (the reviewer's names the base rate too)."""
    return f">= +{TARGET}" + (f" and accuracy above {BASE_RATE} (a constant verdict)" if agent == "reviewer" else "")


def met(agent: str, gain: Optional[float], reviewer_accuracy: Optional[dict[str, Any]]) -> bool:
    """Whether an agent's gain meets the target; the reviewer's also needs its accuracy after training above the
    base rate of a constant verdict."""
    if gain is None or gain < TARGET:
        return False
    if agent != "reviewer":
        return True
    after = ((reviewer_accuracy or {}).get("after") or {}).get("all")
    return after is not None and after > BASE_RATE


def rejudge(path: Path) -> dict[str, Any]:
    """Apply `met` to the figures of an earlier result file, in place; its provenance is kept."""
    record = json.loads(path.read_text())
    for figure in record["figures"]:
        agent = str(figure["key"]).removeprefix("grpo.multi_agent.").removesuffix("_gain")
        figure["met"] = met(agent, figure["value"], figure["detail"].get("reviewer_accuracy"))
        figure["target"] = target_of(agent)
    record["rejudged"] = {"commit": current_commit(), "rule": VERDICT_RULE}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/bench-multi-agent"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rejudge", type=Path, default=None, help="re-judge an earlier result file and stop")
    parser.add_argument("--group-size", type=int, default=None, help="rollouts per task (default: the example's)")
    parser.add_argument("--tasks-per-step", type=int, default=None, help="tasks per step (default: the example's)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.rejudge is not None:
        return rejudge(args.rejudge)
    shutil.rmtree(args.run_dir, ignore_errors=True)  # a fresh run: resuming would mix two runs' figures
    sys.path.insert(0, str(EXAMPLE))
    spec = importlib.util.spec_from_file_location("multi_agent_train", EXAMPLE / "train.py")
    assert spec is not None and spec.loader is not None
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    shape = [
        *(["--group-size", str(args.group_size)] if args.group_size is not None else []),
        *(["--tasks-per-step", str(args.tasks_per_step)] if args.tasks_per_step is not None else []),
    ]
    train.main(["--minutes", str(args.minutes), "--run-dir", str(args.run_dir), "--seed", str(args.seed), *shape])
    summary = json.loads((args.run_dir / "summary.json").read_text())
    figures = []
    for agent, result in summary["agents"].items():
        gain, label = result["gain"], f"the {agent}'s held-out reward gain in {args.minutes:g} minutes"
        unit = "held-out reward gain"
        reviews = summary.get("reviewer_correct_reviews") or {}
        if agent == "reviewer" and reviews.get("before") is not None and reviews.get("after") is not None:
            # trained on a shaped reward (team.review_reward), measured on correct reviews (its reward until then)
            gain = round(reviews["after"] - reviews["before"], 4)
            label = f"the reviewer's held-out gain in correct reviews in {args.minutes:g} minutes"
            unit = "share of correct reviews"
        figures.append(
            Figure(
                key=f"grpo.multi_agent.{agent}_gain",
                label=f"Two adapters in one run: {label}",
                value=gain if gain is not None else float("nan"),
                unit=unit,
                target=target_of(agent),
                met=met(agent, gain, summary.get("reviewer_accuracy")),
                detail={
                    "before": result["held_out_before"],
                    "after": result["held_out_after"],
                    "steps": summary["steps"],
                    "solver_strict_accuracy": summary["solver_strict_accuracy"],
                    "reviewer_accuracy": summary.get("reviewer_accuracy"),
                    "reviewer_correct_reviews": summary.get("reviewer_correct_reviews"),
                    "seed": args.seed,
                    "group_size": summary["settings"]["group_size"],
                    "tasks_per_step": summary["settings"]["tasks_per_step"],
                },
            )
        )
    write_results(args.json, figures)
    return summary


if __name__ == "__main__":
    main()
