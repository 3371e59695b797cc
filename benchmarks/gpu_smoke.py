"""GPU smoke test: the main job's task (examples/arithmetic_rl) trained with GRPO on one CUDA GPU.

    python benchmarks/gpu_smoke.py /models/Qwen2.5-0.5B-Instruct                 # 5 minutes of training
    python benchmarks/gpu_smoke.py /models/Qwen2.5-1.5B-Instruct --minutes 10 --lora-rank 0

MODEL is any local Hugging Face folder (config.json, safetensors, tokenizer with a chat template); 0.5B-1.5B models
fit one GPU with room to spare. Everything is the real thing, as in `scripts/train.sh`: a SQLite store, runner
processes, the local inference engine serving the policy on the GPU, the LLM proxy, GRPO training on the GPU
(`device="cuda"`: float32 master weights, bfloat16 autocast where the GPU supports it). The held-out tasks are
answered greedily before and after training. Prints the device, GRPO steps per second (training steps over the time
they took, rollouts included) and the held-out gain (strict and lenient), and writes them to
`<run-dir>/gpu_smoke.json`.

Refuses (exit code 2) on a machine without CUDA, and for a folder that is not a Hugging Face model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "arithmetic_rl"))


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, help="a local Hugging Face model folder")
    parser.add_argument("--minutes", type=float, default=5.0, help="training time budget (default 5)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--device", default="cuda", help="a CUDA device: cuda or cuda:N (default cuda)")
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--tasks-per-step", type=int, default=4)
    parser.add_argument("--lora-rank", type=int, default=16, help="0 for a full fine-tune (default 16)")
    parser.add_argument("--learning-rate", type=float, default=None, help="default 1e-4 (LoRA) or 1e-6 (full)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, default=ROOT / "runs" / "gpu-smoke")
    return parser.parse_args(argv)


def refusal(args: argparse.Namespace) -> Optional[str]:
    """Why this machine or these arguments cannot run the smoke test, or None."""
    if not args.device.startswith("cuda"):
        return f"--device {args.device!r}: this smoke test is for a CUDA GPU (use cuda or cuda:N)"
    try:
        import torch
    except ImportError:
        return "torch is not installed: pip install 'agentlightning[train]' with a CUDA build of torch"
    if not torch.cuda.is_available():
        return (
            f"no CUDA GPU here: torch {torch.__version__} (CUDA build: {torch.version.cuda or 'none'}) sees no CUDA "
            "device. Run it on a machine with an NVIDIA GPU and a CUDA build of torch; on a CPU, train with "
            "`bash scripts/train.sh`"
        )
    if not (args.model / "config.json").is_file():
        return f"{args.model} is not a Hugging Face model folder (no config.json)"
    return None


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    problem = refusal(args)
    if problem:
        print(f"gpu_smoke: {problem}", file=sys.stderr)
        return 2
    import torch
    from agent import arithmetic_agent
    from train import accuracy, split_tasks

    import agentlightning as agl
    from agentlightning.algorithm.grpo import GRPO
    from agentlightning.utils.device import compute_dtype, resolve_device

    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(device)
    precision = "bfloat16 autocast" if compute_dtype(device) is not None else "float32"
    print(f"device {device} ({name}), {precision}; torch {torch.__version__}; model {args.model}", flush=True)
    if args.run_dir.exists():
        shutil.rmtree(args.run_dir)
    args.run_dir.mkdir(parents=True)
    agl.setup_logging("WARNING")
    lora_rank = args.lora_rank or None
    train, held_out = split_tasks()
    algorithm = GRPO(
        args.model,
        output_dir=args.run_dir,
        resume=False,
        device=args.device,
        group_size=args.group_size,
        tasks_per_step=args.tasks_per_step,
        learning_rate=args.learning_rate or (1e-4 if lora_rank else 1e-6),
        lora_rank=lora_rank,
        max_minutes=args.minutes,
        max_steps=args.max_steps,
        temperature=1.0,
        seed=args.seed,
    )
    trainer = agl.Trainer(
        algorithm=algorithm, n_runners=args.runners, store=f"sqlite:///{args.run_dir / 'store.db'}", progress="off"
    )
    started = time.monotonic()
    trainer.fit(arithmetic_agent, train, val_dataset=held_out)
    wall = time.monotonic() - started
    steps = [entry for entry in algorithm.history if "seconds" in entry]
    step_seconds = sum(entry["seconds"]["total"] for entry in steps)
    reports = {evaluation.label: evaluation.to_dict() for evaluation in algorithm.evaluations}
    before, after = accuracy(reports.get("before")), accuracy(reports.get("after"))
    result: dict[str, Any] = {
        "device": f"{device} ({name})",
        "precision": precision,
        "model": str(args.model),
        "lora_rank": lora_rank,
        "steps": len(steps),
        "steps_per_second": round(len(steps) / step_seconds, 4) if step_seconds else None,
        "mean_seconds_per_step": {
            part: round(sum(e["seconds"][part] for e in steps) / max(len(steps), 1), 3)
            for part in ("rollout", "update", "weight_swap", "total")
        },
        "held_out": {"before": before, "after": after},
        "gain": {
            check: None if before[check] is None or after[check] is None else round(after[check] - before[check], 4)  # type: ignore[operator]
            for check in ("strict", "lenient")
        },
        "max_memory_allocated_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
        "wall_seconds": round(wall, 1),
        "load_average": os.getloadavg(),
    }
    (args.run_dir / "gpu_smoke.json").write_text(json.dumps(result, indent=2))
    print(
        f"{result['steps']} GRPO steps, {result['steps_per_second']} steps/s "
        f"({result['mean_seconds_per_step']['total']} s/step: rollout {result['mean_seconds_per_step']['rollout']}, "
        f"update {result['mean_seconds_per_step']['update']}); held-out strict {before['strict']} -> "
        f"{after['strict']} (gain {result['gain']['strict']}), lenient {before['lenient']} -> {after['lenient']} "
        f"(gain {result['gain']['lenient']}); peak GPU memory {result['max_memory_allocated_gb']} GB",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
