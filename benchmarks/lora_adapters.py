"""Several LoRA adapters on one base model in the local inference engine: memory per adapter and generation speed.

Memory: the bytes the engine's adapter stacks hold after loading 1, 2 and 4 adapters of rank `--rank` on every
attention and MLP projection of SmolLM2-135M-Instruct (what GRPO's `lora_target_modules=None` adapts), and the
process's resident memory growth over the same loads.
Speed: `--requests` chat prompts, each sampling exactly `--tokens` tokens (temperature 1, `ignore_eos`), with
`--concurrency` requests in flight, sent to (a) the base model only, (b) one adapter only, (c) the base model and two
adapters in turn (rows of different adapters then share every decoding step). Tokens/s is completion tokens over
the wall time of the batch; the best of `--rounds` is kept.

Usage:
    python benchmarks/lora_adapters.py [--rank 16] [--requests 24] [--tokens 16] [--concurrency 8] [--json PATH]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, Peer, add_json_argument, load_average, write_results

QUESTIONS = ["What is {a} + {b}? Answer with just the number.", "Is {a} + {b} = {c}? Reply yes or no."]


def rss_bytes() -> int:
    """This process's resident memory (Linux /proc; 0 elsewhere)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def random_adapter(engine: Any, rank: int, seed: int) -> dict[str, tuple[Any, Any]]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return {
        name: (
            torch.randn(rank, module.in_features, generator=generator) * 0.01,
            torch.randn(module.out_features, rank, generator=generator) * 0.01,
        )
        for name, module in engine.model.named_modules()
        if isinstance(module, torch.nn.Linear) and ".layers." in name
    }


def throughput(engine: Any, adapters: list[Optional[str]], requests: int, tokens: int, concurrency: int) -> float:
    from agentlightning.inference.sampling import SamplingParams

    def one(index: int) -> int:
        text = QUESTIONS[index % 2].format(a=index % 10, b=(index * 7) % 10, c=index % 19)
        prompt = engine.chat_prompt([{"role": "user", "content": text}])
        params = SamplingParams(
            max_tokens=tokens, temperature=1.0, ignore_eos=True, seed=index, adapter=adapters[index % len(adapters)]
        )
        return len(engine.generate(prompt, params)[0].token_ids)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        produced = sum(pool.map(one, range(requests)))
    return produced / (time.perf_counter() - started)


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    add_json_argument(parser)
    args = parser.parse_args(argv)

    from agentlightning.inference.engine import InferenceEngine

    engine = InferenceEngine.from_default()
    base_bytes = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    memory: dict[int, dict[str, float]] = {}
    rss_start = rss_bytes()
    for count in (1, 2, 4):
        while len(engine.adapters.names) < count:
            index = len(engine.adapters.names)
            engine.load_adapter(f"agent{index}", random_adapter(engine, args.rank, index), scale=2.0, version="v")
        memory[count] = {
            "adapter_mb": engine.adapters.nbytes() / 1e6,
            "rss_growth_mb": (rss_bytes() - rss_start) / 1e6,
        }
    per_adapter_mb = (memory[4]["adapter_mb"] - memory[1]["adapter_mb"]) / 3
    for name in list(engine.adapters.names)[2:]:
        engine.unload_adapter(name)

    mixes: dict[str, list[Optional[str]]] = {
        "base": [None],
        "one_adapter": ["agent0"],
        "mixed": [None, "agent0", "agent1"],
    }
    throughput(engine, [None], args.concurrency, 4, args.concurrency)  # warm-up
    each_round = {
        name: [throughput(engine, mix, args.requests, args.tokens, args.concurrency) for _ in range(args.rounds)]
        for name, mix in mixes.items()
    }
    speed = {name: max(rates) for name, rates in each_round.items()}
    load = load_average()
    print(f"base model: {base_bytes / 1e6:.1f} MB; adapters of rank {args.rank}: "
          + ", ".join(f"{n}: {m['adapter_mb']:.1f} MB (RSS +{m['rss_growth_mb']:.1f} MB)" for n, m in memory.items())
          + f"; {per_adapter_mb:.2f} MB per adapter")  # fmt: skip
    print(", ".join(f"{name} {value:.1f} tokens/s" for name, value in speed.items()) + f" (load average {load})")
    detail = {"rank": args.rank, "requests": args.requests, "tokens": args.tokens, "concurrency": args.concurrency}
    figures = [
        Figure(
            key="inference.lora.mb_per_adapter",
            label=f"Memory per served LoRA adapter (rank {args.rank}, every projection, SmolLM2-135M)",
            value=round(per_adapter_mb, 2),
            unit="MB",
            higher_is_better=False,
            detail={**detail, "base_model_mb": round(base_bytes / 1e6, 1), "by_count": memory},
        ),
        Figure(
            key="inference.lora.mixed_tokens_per_s",
            label="Generation with base + 2 adapters mixed in one batch (vs base only)",
            value=round(speed["mixed"], 2),
            unit="tokens/s",
            peer=Peer("base model only", round(speed["base"], 2), [round(r, 2) for r in each_round["base"]]),
            detail={
                **detail,
                "statistic": "best of the rounds",
                "one_adapter_tokens_per_s": round(speed["one_adapter"], 2),
                "one_adapter_rounds": [round(r, 2) for r in each_round["one_adapter"]],
            },
            rounds=[round(r, 2) for r in each_round["mixed"]],
        ),
    ]
    write_results(args.json, figures)
    return {"memory": memory, "speed": speed}


if __name__ == "__main__":
    main()
