"""GRPO update time with the samples in arrival order against prefix order (`learning.update.update_chunks`).

A step's samples arrive rollout by rollout. An agent with several conversations per rollout (the compacting agent's
main conversation and its summaries) interleaves them, so a micro-batch cut from that order mixes prompts that share
no leading ids: the shared-prefix forward (`PolicyBatch.shared_prefix`) finds nothing to share and the logits start at
the shortest prompt. Sorted by prompt ids, each micro-batch holds one kind of conversation.

The samples are generated with the compacting run's shape (random ids; lengths and sharing are what matter):
`--families` conversation kinds per rollout, each opening with its own `--prefix`-token system prompt and worked
examples, then a 30-token task shared by a group's rollouts and a multi-turn response of 150-250 tokens of which
about 60 % generated (trained); `--tasks` groups of `--group-size` rollouts. The update is GRPO's own
(`apply_update`) on SmolLM2-135M (full fine-tune as the compacting example trains, or `--lora-rank`; `--tiny` for the
tiny random model), at a learning rate of 1e-9 so the weights stay put and both orders' mean negative log-probability
of the trained tokens (`sampled_nll`) can be compared. The two orders alternate `--repeats` times.

    python benchmarks/update_order.py                        # 24 samples of ~700 tokens, SmolLM2, 3 repeats
    python benchmarks/update_order.py --tiny --repeats 1     # the smoke test

Reports per order: the positions the forward passes compute (rows x width minus the shared prefix run once, and the
logit positions from each micro-batch's first prediction: counts, independent of the machine's load) and the median
update seconds; `--json PATH` writes the time ratio (arrival over prefix) with arrival order as the peer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, Peer, add_json_argument, current_commit, write_results
from multi_turn_samples import build_policy

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.loss import Sample, make_batch
from agentlightning.algorithm.grpo.learning.update import apply_update, micro_batches, update_chunks


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", type=int, default=3, help="conversation kinds per rollout (default 3)")
    parser.add_argument("--prefix", type=int, default=400, help="tokens of each kind's shared opening (default 400)")
    parser.add_argument("--tasks", type=int, default=2, help="groups per step (default 2)")
    parser.add_argument("--group-size", type=int, default=4, help="rollouts per group (default 4)")
    parser.add_argument("--lora-rank", type=int, default=None, help="train a LoRA adapter (default: full fine-tune)")
    parser.add_argument("--tiny", action="store_true", help="the tiny random model instead of SmolLM2")
    parser.add_argument("--repeats", type=int, default=3, help="timed updates per order (default 3)")
    add_json_argument(parser)
    return parser.parse_args()


def step_samples(args: argparse.Namespace, vocabulary: int, seed: int = 0) -> list[Sample]:
    """One step's samples in arrival order: rollout by rollout, each rollout's conversation kinds one after another."""
    rng = random.Random(seed)

    def ids(count: int) -> list[int]:
        return [rng.randrange(10, vocabulary) for _ in range(count)]

    openings = [ids(args.prefix) for _ in range(args.families)]
    samples = []
    for task in range(args.tasks):
        questions = [ids(30) for _ in range(args.families)]
        for member in range(args.group_size):
            advantage = 1.0 if member % 2 else -1.0
            for kind in range(args.families):
                response = ids(rng.randint(150, 250))
                mask = [1 if rng.random() < 0.6 else 0 for _ in response]
                mask[0] = 1
                samples.append(
                    Sample(
                        openings[kind] + questions[kind],
                        response,
                        advantage,
                        rollout_id=f"task{task}-member{member}",
                        group=f"task{task}",
                        loss_mask=mask,
                    )
                )
    return samples


def computed_positions(chunks: list[Any]) -> dict[str, int]:
    """What the update's forward passes compute over these micro-batches: token positions (rows x width, the
    shared prefix counted once) and logit positions (rows x (width - first prediction))."""
    tokens = logits = shared_chunks = 0
    for chunk in chunks:
        batch = make_batch(chunk, pad_token_id=0)
        rows, width = batch.input_ids.shape
        shared = batch.shared_prefix
        tokens += shared + rows * (width - shared)
        logits += rows * (width - max(batch.first_prediction, 0))
        shared_chunks += 1 if shared else 0
    return {
        "micro_batches": len(chunks),
        "micro_batches_sharing_a_prefix": shared_chunks,
        "token_positions": tokens,
        "logit_positions": logits,
    }


def main() -> dict[str, Any]:
    args = parse_args()
    config = GRPOConfig(
        group_size=args.group_size, tasks_per_step=args.tasks, lora_rank=args.lora_rank, learning_rate=1e-9
    )
    policy = build_policy(args.tiny, config)
    arrival = step_samples(args, vocabulary=len(policy.tokenizer))
    # `apply_update` cuts its micro-batches with `update_chunks`; the arrival side swaps in the plain cut of the
    # samples as they came (what the update did before), so both sides run the same update code otherwise.
    import agentlightning.algorithm.grpo.learning.update as update_module

    cut = {"arrival": micro_batches, "prefix": update_chunks}
    sizes = (config.samples.micro_batch_size, config.samples.micro_batch_tokens)
    seconds: dict[str, list[float]] = {name: [] for name in cut}
    nll: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, chunker in cut.items():  # alternating, so both orders see the same machine load
            update_module.update_chunks = chunker  # type: ignore[assignment]
            try:
                started = time.perf_counter()
                metrics = apply_update(policy, arrival, config)
                seconds[name].append(time.perf_counter() - started)
            finally:
                update_module.update_chunks = update_chunks  # type: ignore[assignment]
            nll.setdefault(name, metrics["sampled_nll"])
    result: dict[str, Any] = {
        "commit": current_commit(),
        "load_average_1min": os.getloadavg()[0],
        "model": "tiny" if args.tiny else "SmolLM2-135M-Instruct (Q4_1 GGUF de-quantized, fp32)",
        "training": f"LoRA r={args.lora_rank}" if args.lora_rank else "full fine-tune",
        "samples": len(arrival),
        "sample_tokens": sum(sample.length for sample in arrival),
        "shape": {"families": args.families, "prefix": args.prefix, "tasks": args.tasks, "group_size": args.group_size},
        "orders": {},
    }
    for name, chunker in cut.items():
        result["orders"][name] = {
            **computed_positions(chunker(arrival, *sizes)),
            "sampled_nll": nll[name],
            "update_seconds_median": round(statistics.median(seconds[name]), 3),
            "update_seconds": [round(value, 3) for value in seconds[name]],
        }
    arrival_side, prefix_side = result["orders"]["arrival"], result["orders"]["prefix"]
    result["time_ratio_arrival_over_prefix"] = round(
        arrival_side["update_seconds_median"] / prefix_side["update_seconds_median"], 3
    )
    result["nll_relative_difference"] = abs(arrival_side["sampled_nll"] - prefix_side["sampled_nll"]) / max(
        abs(arrival_side["sampled_nll"]), 1e-12
    )
    print(json.dumps(result, indent=2))
    write_results(args.json, figures(result), extra=result)
    return result


def figures(result: dict[str, Any]) -> list[Figure]:
    """The update's time in prefix order (arrival order as the peer) and the log-probability check."""
    arrival, prefix = result["orders"]["arrival"], result["orders"]["prefix"]
    what = (
        f"{result['samples']} samples of {result['sample_tokens'] // result['samples']} tokens, "
        f"{result['shape']['families']} conversation kinds per rollout, "
        f"{'tiny model' if result['model'] == 'tiny' else 'SmolLM2-135M'}, {result['training']}"
    )
    return [
        Figure(
            key="grpo.update_order.seconds",
            label=f"GRPO update in prefix order ({what})",
            value=prefix["update_seconds_median"],
            unit="s",
            target="faster than arrival order",
            met=prefix["update_seconds_median"] < arrival["update_seconds_median"],
            higher_is_better=False,
            peer=Peer("arrival order", arrival["update_seconds_median"], arrival["update_seconds"]),
            detail={
                "statistic": "median of the repeats; rounds: each repeat",
                "token_positions": {"arrival": arrival["token_positions"], "prefix": prefix["token_positions"]},
                "logit_positions": {"arrival": arrival["logit_positions"], "prefix": prefix["logit_positions"]},
            },
            rounds=prefix["update_seconds"],
        ),
        Figure(
            key="grpo.update_order.nll_relative_difference",
            label="GRPO update in prefix order: mean negative log-probability of the trained tokens, relative "
            "difference from arrival order",
            value=result["nll_relative_difference"],
            unit="",
            target="the same (< 1e-5)",
            met=result["nll_relative_difference"] < 1e-5,
            higher_is_better=False,
        ),
    ]


if __name__ == "__main__":
    main()
