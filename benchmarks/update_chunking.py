"""GRPO update time of calculator-shaped samples under three ways of cutting them into micro-batches.

Every sample of a calculator step opens with the same ~440 tokens (system prompt, tool descriptions, two worked
examples), then its question and a two-call response. A micro-batch runs that opening once (`shared_prefix`), so
how many micro-batches a step is cut into decides how often the opening is computed:

- `padded` (before 2026-11-29): at most 8 rows, padded rows x longest <= 4096 positions: 7, 7 and 2 rows;
- `shared` (now): at most `micro_batch_size` rows (8), the opening counted once against 4096: 8 and 8 rows;
- `shared16`: the same with 16 rows, one micro-batch.

    python benchmarks/update_chunking.py                     # 16 samples, SmolLM2-135M with LoRA r=16, 3 repeats
    python benchmarks/update_chunking.py --tiny --repeats 1  # the smoke test

Each repeat runs GRPO's `apply_update` once per cut (alternating, so the three see the same load) at a learning
rate of 1e-9 (the weights stay put). Reports per cut: its micro-batches, the token positions the forward passes
compute (the opening counted once per micro-batch) and the median update seconds; `--json PATH` writes the time of
the default cut with the `padded` cut as the peer.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, Peer, add_json_argument, write_results
from multi_turn_samples import build_policy
from update_order import computed_positions

import agentlightning.algorithm.grpo.learning.update as update_module
from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.loss import Sample

Cut = Callable[[Sequence[Sample], int, int], list[Sequence[Sample]]]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=16, help="samples of the step (groups of 4; default 16)")
    parser.add_argument("--opening", type=int, default=440, help="tokens every sample opens with (default 440)")
    parser.add_argument("--repeats", type=int, default=3, help="timed updates per cut (default 3)")
    parser.add_argument("--tiny", action="store_true", help="the tiny random model instead of SmolLM2")
    add_json_argument(parser)
    return parser.parse_args()


def calculator_samples(count: int, opening_length: int, vocabulary: int, seed: int = 0) -> list[Sample]:
    """A calculator step's samples (random ids; lengths and sharing are what matter): one opening for all, a
    25-token question per group of 4, a response of 45-70 tokens whose 15 tool-result tokens are not trained."""
    rng = random.Random(seed)

    def ids(length: int) -> list[int]:
        return [rng.randrange(10, vocabulary) for _ in range(length)]

    opening = ids(opening_length)
    samples = []
    for group in range(count // 4):
        question = ids(25)
        for member in range(4):
            response = ids(rng.randint(45, 70))
            mask = [1] * 28 + [0] * 15 + [1] * (len(response) - 43)
            advantage = 1.0 if member % 2 else -1.0
            samples.append(Sample(opening + question, response, advantage, group=f"g{group}", loss_mask=mask))
    return samples


def padded_cut(samples: Sequence[Sample], max_rows: int, max_tokens: int) -> list[Sequence[Sample]]:
    """The cut before: prefix order, padded rows x longest within the token budget."""
    return update_module.micro_batches(update_module.prefix_order(samples), max_rows, max_tokens)


def main() -> dict[str, Any]:
    args = parse_args()
    settings = {"group_size": 4, "tasks_per_step": max(args.samples // 4, 1), "lora_rank": 16, "learning_rate": 1e-9}
    configs = {
        "padded": GRPOConfig(**settings, micro_batch_size=8),
        "shared": GRPOConfig(**settings, micro_batch_size=8),
        "shared16": GRPOConfig(**settings, micro_batch_size=16),
    }
    cuts: dict[str, Cut] = {
        "padded": padded_cut,
        "shared": update_module.update_chunks,
        "shared16": update_module.update_chunks,
    }
    policy = build_policy(args.tiny, configs["shared"])
    samples = calculator_samples(args.samples, args.opening, len(policy.tokenizer))
    seconds: dict[str, list[float]] = {name: [] for name in cuts}
    default_cut = update_module.update_chunks
    for _ in range(args.repeats):
        for name, cut in cuts.items():
            update_module.update_chunks = cut  # type: ignore[assignment]
            try:
                started = time.perf_counter()
                update_module.apply_update(policy, samples, configs[name])
                seconds[name].append(round(time.perf_counter() - started, 3))
            finally:
                update_module.update_chunks = default_cut  # type: ignore[assignment]
    result: dict[str, Any] = {"samples": len(samples), "opening": args.opening, "cuts": {}}
    for name, cut in cuts.items():
        sizes = (configs[name].samples.micro_batch_size, configs[name].samples.micro_batch_tokens)
        chunks = cut(samples, *sizes)
        result["cuts"][name] = {
            "rows": [len(chunk) for chunk in chunks],
            **computed_positions(list(chunks)),
            "update_seconds": seconds[name],
            "update_seconds_median": statistics.median(seconds[name]),
        }
    print(json.dumps(result, indent=2))
    padded, shared = result["cuts"]["padded"], result["cuts"]["shared"]
    figure = Figure(
        key="grpo.update_chunking.seconds",
        label=(
            f"GRPO update of {len(samples)} calculator-shaped samples (a {args.opening}-token opening shared by all), "
            f"micro-batches of {shared['rows']} rows, the opening counted once "
            f"({'tiny model' if args.tiny else 'SmolLM2-135M, LoRA r=16'})"
        ),
        value=shared["update_seconds_median"],
        unit="s",
        target="faster than padded rows x longest",
        met=shared["update_seconds_median"] < padded["update_seconds_median"],
        higher_is_better=False,
        peer=Peer(f"padded ({padded['rows']} rows)", padded["update_seconds_median"], padded["update_seconds"]),
        detail={"statistic": "median of the repeats", **result["cuts"]},
        rounds=shared["update_seconds"],
    )
    write_results(args.json, [figure])
    return result


if __name__ == "__main__":
    main()
