"""Train a solver and a reviewer at once with GRPO, each its own LoRA adapter on one base model.

python examples/multi_agent/train.py                                # both agents, SmolLM2-135M-Instruct, 15 minutes
python examples/multi_agent/train.py --agents solver                # the solver's adapter only (reviewer: base)
python examples/multi_agent/train.py --agents solver --single       # the solver, one policy (agent_match="solver")
python examples/multi_agent/train.py --tiny --max-steps 2           # a tiny random model (seconds; the smoke test)
python examples/multi_agent/train.py --serving vllm --vllm-arg=--dtype --vllm-arg=float32   # sample from vLLM

`--agents solver,reviewer` is `GRPO(agent_match=["solver", "reviewer"])`: each agent's calls go to its own adapter
(the resources `solver_llm` / `reviewer_llm`), its groups are built from its own calls and its own reward (emitted
inside its span, see team.py), and each adapter takes its own optimizer step. Every training pair is a task twice,
once showing the reviewer a right answer and once a wrong one, and `balance_by` puts one of each kind in every step
(`--tasks-per-step 2`), so the reviewer is always shown as many right answers as wrong ones. The held-out tasks
(half of each kind, their answers fixed by the task alone) are run greedily before and after; `summary.json` in the
run directory holds each agent's held-out reward before and after and the reviewer's accuracy per kind.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from team import (
    REVIEW_KINDS,
    correct_review,
    review_input,
    review_kind,
    solver_and_reviewer,
    verdict,
)  # not `agents`: that is the OpenAI Agents SDK's package

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.tracer.otel import OtelTracer

Task = dict[str, Any]
WRONG_OFFSETS = (-3, -2, -1, 1, 2, 3)


def split_tasks(seed: int = 0) -> tuple[list[Task], list[Task]]:
    """The 100 pairs a, b in 0..9: 50 for training, 50 held out, split by the unordered pair (no held-out question
    is a training question with its operands swapped)."""
    unordered = [(a, b) for a in range(10) for b in range(a, 10)]
    random.Random(seed).shuffle(unordered)
    held: set[tuple[int, int]] = set()
    size = 0
    for a, b in unordered:
        if size + (1 if a == b else 2) <= 50:
            held.add((a, b))
            size += 1 if a == b else 2
    pairs = [{"a": a, "b": b} for a in range(10) for b in range(10)]
    random.Random(seed).shuffle(pairs)
    held_out = [t for t in pairs if (min(t["a"], t["b"]), max(t["a"], t["b"])) in held]
    return [t for t in pairs if t not in held_out], held_out


def wrong_offset(task: Task, seed: int) -> int:
    """The offset of a "wrong" review of `task`: a seeded draw from -3..3 without 0 that keeps the answer >= 0."""
    total = int(task["a"]) + int(task["b"])
    return random.Random(f"offset:{seed}:{task['a']}:{task['b']}").choice([d for d in WRONG_OFFSETS if total + d >= 0])


def training_tasks(pairs: list[Task], seed: int) -> list[Task]:
    """Each training pair twice: once with a right answer for the reviewer, once with a wrong one (the solver's own
    mistake when it makes one, else the sum moved by a seeded offset)."""
    return [
        {
            **pair,
            "review": kind,
            **({"offset": wrong_offset(pair, seed), "solver_mistakes": True} if kind == "wrong" else {}),
        }
        for pair in pairs
        for kind in REVIEW_KINDS
    ]


def held_out_tasks(pairs: list[Task], seed: int) -> list[Task]:
    """The held-out pairs, alternately showing the reviewer a right and a wrong answer (any even prefix is balanced).
    Their answers are fixed by the task alone (no solver mistakes), so before and after judge the same inputs."""
    return [
        {**pair, "review": "right"} if i % 2 == 0 else {**pair, "review": "wrong", "offset": wrong_offset(pair, seed)}
        for i, pair in enumerate(pairs)
    ]


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", default="solver,reviewer", help="agents to train, one adapter each")
    parser.add_argument("--single", action="store_true", help="one agent as one policy (agent_match=<pattern>)")
    parser.add_argument("--minutes", type=float, default=None, help="training time (default 15 unless --max-steps)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--run-dir", default="runs/multi_agent")
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--held-out", type=int, default=None, help="held-out tasks evaluated (default 50; --tiny 4)")
    parser.add_argument("--tiny", action="store_true", help="a tiny random model instead of SmolLM2")
    parser.add_argument(
        "--serving", choices=["local", "vllm"], default="local", help="rollout engine (vLLM: docs/vllm.md)"
    )
    parser.add_argument(
        "--vllm-arg",
        action="append",
        default=[],
        help="an extra `vllm serve` argument (repeat: --vllm-arg=--dtype --vllm-arg=float32)",
    )
    parser.add_argument(
        "--failed-group-reward",
        type=float,
        default=None,
        help="train the groups whose rewards do not vary and are all at most R with a negative advantage instead of "
        "skipping them (GRPO's failed_group_reward; 0.5 catches the reviewer's 'no' to every right answer, which "
        "scores 0.5 throughout under its shaped reward; default: off)",
    )
    parser.add_argument(
        "--failed-group-advantage", type=float, default=-0.5, help="the advantage of such groups (default -0.5)"
    )
    args = parser.parse_args(argv)
    args.agent_list = [name.strip() for name in args.agents.split(",") if name.strip()]
    if args.single and len(args.agent_list) != 1:
        parser.error("--single trains one agent: pass --agents with one name")
    if args.tiny and args.serving == "vllm":
        parser.error("--tiny serves the tiny model in process; vLLM serves SmolLM2 (drop one of them)")
    if args.held_out is None:
        args.held_out = 4 if args.tiny else 50
    if args.minutes is None and args.max_steps is None:
        args.minutes = 15.0
    return args


def failed_groups(args: argparse.Namespace) -> dict[str, float]:
    """GRPO's settings for `--failed-group-reward` / `--failed-group-advantage` (none without the first)."""
    if args.failed_group_reward is None:
        return {}
    return {"failed_group_reward": args.failed_group_reward, "failed_group_advantage": args.failed_group_advantage}


def main(argv: Optional[list[str]] = None) -> GRPO:
    args = parse_args(argv)
    agl.setup_logging("INFO")
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    engine = None
    if args.tiny:
        from agentlightning.inference.tiny import build_tiny_engine

        engine = build_tiny_engine(seed=args.seed)
    train_pairs, held_out_pairs = split_tasks(args.seed)
    train = training_tasks(train_pairs, args.seed)
    held_out = held_out_tasks(held_out_pairs, args.seed)[: args.held_out]
    vllm: Optional[dict[str, Any]] = None
    if args.serving == "vllm":  # $AGL_VLLM_COMMAND names vLLM's venv (docs/vllm.md)
        vllm = {"args": list(args.vllm_arg), "log_path": run_dir / "vllm.log"}
    algorithm = GRPO(
        engine=engine,
        serving=args.serving,
        vllm=vllm,
        output_dir=run_dir,
        agent_match=args.agent_list[0] if args.single else args.agent_list,
        group_size=args.group_size,
        tasks_per_step=args.tasks_per_step,
        balance_by=review_kind,  # each step: as many tasks showing the reviewer a right answer as a wrong one
        learning_rate=args.learning_rate,
        lora_rank=args.lora_rank,
        max_minutes=args.minutes,
        max_steps=args.max_steps,
        temperature=1.0,
        # the solver's 8-token and the reviewer's 16-token caps are part of the task ("just the number", "the sum,
        # so yes/no"):
        # an answer that runs past them is scored as cut, and trained on, so the policy learns to stop in time
        truncated="keep",
        seed=args.seed,
        **failed_groups(args),
    )
    trainer = agl.Trainer(
        algorithm=algorithm,
        n_runners=args.runners,
        tracer=OtelTracer(instrument=["openai"]),  # client-side capture: agent spans and the calls' token ids
        store=f"sqlite:///{run_dir / 'store.db'}",
    )
    started = time.monotonic()
    trainer.fit(solver_and_reviewer, train, val_dataset=held_out)
    write_summary(run_dir / "summary.json", args, algorithm, time.monotonic() - started)
    return algorithm


def write_summary(path: Path, args: argparse.Namespace, algorithm: GRPO, seconds: float) -> dict[str, Any]:
    """Each agent's held-out reward before and after (and its gain), the reviewer's held-out accuracy per kind of
    review input and its share of correct reviews, the strict accuracy of the solver's answers, and the run's
    settings."""
    reports = {report.label: report for report in algorithm.evaluations}
    per_agent: dict[str, Any] = {}
    for agent in args.agent_list if not args.single else []:
        before = algorithm.agent_evaluations.get("before", {}).get(agent)
        after = algorithm.agent_evaluations.get("after", {}).get(agent)
        gain = round(after - before, 4) if before is not None and after is not None else None
        per_agent[agent] = {"held_out_before": before, "held_out_after": after, "gain": gain}
    reviewer = {label: reviewer_accuracy(reports[label].items) for label in reports} if not args.single else {}
    reviews = {label: correct_reviews(reports[label].items) for label in reports} if not args.single else {}
    summary = {
        "agents": per_agent,
        "reviewer_accuracy": reviewer,
        "reviewer_correct_reviews": reviews,
        "final_reward": {label: reports[label].mean_reward for label in ("before", "after") if label in reports},
        "solver_strict_accuracy": {label: _strict(reports[label].items) for label in reports},
        "steps": algorithm.step,
        "seconds": round(seconds, 1),
        "settings": {k: v for k, v in vars(args).items() if k != "agent_list"},
        "history": [
            {
                "step": entry["step"],
                "reward_mean": entry.get("reward_mean"),
                "strata": entry.get("strata"),
                "agents": entry.get("agents"),
            }
            for entry in algorithm.history
        ],
    }
    path.write_text(json.dumps(summary, indent=2))
    shown = {
        "agents": per_agent,
        "reviewer_accuracy": reviewer,
        "reviewer_correct_reviews": reviews,
        "solver_strict_accuracy": summary["solver_strict_accuracy"],
    }
    print(json.dumps(shown, indent=2))
    return summary


def reviewer_accuracy(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The share of held-out tasks whose review verdict was correct, per kind of review input and over all (the
    reviewer's reply is each rollout's last call; a task without one counts as wrong). Saying "yes" to everything
    scores 1 on "right", 0 on "wrong" and 0.5 over a balanced set."""
    correct: dict[str, list[bool]] = {kind: [] for kind in REVIEW_KINDS}
    for item in items:
        said = verdict(item["answer"]) if isinstance(item.get("answer"), str) else None
        kind = review_kind(item["task"])
        correct[kind].append(said is not None and said == (kind == "right"))
    every = [c for values in correct.values() for c in values]
    found: dict[str, Any] = {kind: _share(values) for kind, values in correct.items()}
    found["all"] = _share(every)
    return found


def correct_reviews(items: list[dict[str, Any]]) -> Optional[float]:
    """The share of held-out tasks whose review is correct (`team.correct_review`; the reviewer's reply is each
    rollout's last call). Held-out tasks fix the answer shown by the task alone, so it is read from the task."""
    correct = [
        isinstance(item.get("answer"), str)
        and correct_review(
            item["answer"], int(item["task"]["a"]), int(item["task"]["b"]), review_input(item["task"], "")[0]
        )
        for item in items
    ]
    return _share(correct)


def _strict(items: list[dict[str, Any]]) -> Optional[float]:
    """The share of tasks whose final reward (the solver's) is exactly 1."""
    return sum(1 for item in items if item.get("reward") == 1.0) / len(items) if items else None


def _share(values: list[bool]) -> Optional[float]:
    return round(sum(values) / len(values), 4) if values else None


if __name__ == "__main__":
    main()
