"""Training compute per GRPO update: multi-turn samples (one per conversation) against one sample per LLM call.

Reads finished rollouts of a run's store (the calculator agent's, say), turns their calls into samples both ways
(`aggregation="trajectory"` and `"transition"`, the code GRPO runs), and for the same rollouts reports:

- tokens: the sum of the samples' lengths (what a forward pass must read), and the padded positions the update's
  micro-batches actually compute (rows x width, forward and backward each);
- the loss of both sample sets under the same weights (equal up to float error with token-level aggregation);
- the wall time of one update (forward, backward, optimizer step) with the policy GRPO trains (LoRA r=16 on the
  embedded SmolLM2-135M unless --tiny), alternating the two forms `--repeats` times.

    python benchmarks/multi_turn_samples.py --store sqlite:///runs/calc-langgraph/store.db --rollouts 32
    python benchmarks/multi_turn_samples.py --synthetic --tiny      # no store: generated 2- and 3-call rollouts

`--json PATH` writes the ratios (tokens, update time; target: 2x fewer) and the loss difference (target: the same
loss) through benchmarks/_results.py, with the whole result under `extra`.
"""

from __future__ import annotations

import argparse
import asyncio
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

from _results import Figure, add_json_argument, current_commit, write_results

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.loss import Sample
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts, read_rollouts
from agentlightning.types import Triplet


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="store URL of a run whose training rollouts to use")
    parser.add_argument("--rollouts", type=int, default=32, help="rollouts with at least two calls (default 32)")
    parser.add_argument("--synthetic", action="store_true", help="generated rollouts instead of a store's")
    parser.add_argument("--tiny", action="store_true", help="the tiny random model instead of SmolLM2")
    parser.add_argument("--repeats", type=int, default=3, help="timed updates per form (default 3)")
    parser.add_argument("--micro-batch-size", type=int, default=8)
    add_json_argument(parser)
    parser.add_argument(
        "--no-shared-prefix", action="store_true", help="run every row whole (the update before prefix sharing)"
    )
    return parser.parse_args()


async def rollouts_from_store(url: str, wanted: int) -> list[RolloutData]:
    """The latest finished training rollouts with at least two LLM calls carrying token ids."""
    from agentlightning.store.url import store_from_url

    store = store_from_url(url)
    try:
        found = await store.query_rollouts(status_in=["succeeded"])
        candidates = [r for r in found if (r.mode or "train") == "train"][::-1]
        chosen: list[RolloutData] = []
        for start in range(0, len(candidates), 64):
            for item in await read_rollouts(store, candidates[start : start + 64], None, agent_match=None):
                if len(item.calls) >= 2 and item.reward is not None:
                    chosen.append(item)
            if len(chosen) >= wanted:
                break
        return chosen[:wanted]
    finally:
        await store.close()


def synthetic_rollouts(count: int, vocabulary: int, seed: int = 0) -> list[RolloutData]:
    """Tool-calling rollouts of the calculator's shape: a 380-token system prompt (tools, worked examples) shared
    by all, a 40-token question shared by the pairs of a group, 2 or 3 calls of 20-30 generated tokens with 8-12-token
    tool results between them (ids are random, lengths and sharing are what matter)."""
    from types import SimpleNamespace

    rng = random.Random(seed)
    system = [rng.randrange(vocabulary) for _ in range(380)]
    data = []
    question: list[int] = []
    for index in range(count):
        if index % 2 == 0:
            question = [rng.randrange(vocabulary) for _ in range(40)]
        prompt = system + question
        calls = []
        for _ in range(2 if index % 3 else 3):
            response = [rng.randrange(vocabulary) for _ in range(rng.randint(20, 30))]
            calls.append(Triplet(prompt={"token_ids": list(prompt)}, response={"token_ids": response}))
            prompt = prompt + response + [rng.randrange(vocabulary) for _ in range(rng.randint(8, 12))]
        rollout: Any = SimpleNamespace(status="succeeded", rollout_id=f"synthetic-{index}")
        data.append(RolloutData(rollout, float(index % 2), calls))
    return data


def samples_both_ways(data: list[RolloutData]) -> dict[str, list[Sample]]:
    """The samples GRPO builds from `data` each way; every rollout is its own pair-wise varying group."""
    groups = [index // 2 for index in range(len(data))]
    for index, item in enumerate(data):  # rewards alternate within each pair, so every group is informative
        item.reward = float(index % 2)
    indices = list(range((len(data) + 1) // 2))
    result = {}
    for aggregation in ("trajectory", "transition"):
        config = GRPOConfig(group_size=2, tasks_per_step=1, aggregation=aggregation, max_response_tokens=4096)
        result[aggregation] = build_samples(data, groups, indices, SkipCounts(), config).samples
    return result


def padded_positions(samples: list[Sample], micro_batch_size: int) -> int:
    """Rows x width of the update's micro-batches (the positions a forward pass computes, padding included)."""
    total = 0
    for start in range(0, len(samples), micro_batch_size):
        chunk = samples[start : start + micro_batch_size]
        total += len(chunk) * max(s.length for s in chunk)
    return total


def build_policy(tiny: bool, config: GRPOConfig) -> Any:
    from agentlightning.algorithm.grpo.learning.policy import Policy

    if tiny:
        from agentlightning.inference.tiny import build_tiny_engine

        return Policy.from_engine(build_tiny_engine(seed=0), config)
    from agentlightning.inference.engine import InferenceEngine

    return Policy.from_engine(InferenceEngine.from_default(), config)


def loss_and_trained_log_prob(policy: Any, samples: list[Sample], micro_batch_size: int) -> tuple[float, float]:
    """The token-aggregated GRPO loss of `samples` under the policy's current weights (no update), and the summed
    log-probability of the tokens it trains.

    The loss alone cannot show that the two forms agree: at a ratio of 1 it is minus the advantage-weighted token
    count, and GRPO's advantages sum to zero within a group, so a group whose responses have equal lengths adds
    nothing and both forms give about zero (float error). The summed log-probability of the trained tokens is what
    both forms must compute identically, and it is never zero."""
    import torch

    from agentlightning.algorithm.grpo.learning.loss import clipped_policy_loss, make_batch, sequence_log_probs

    batches = [
        make_batch(samples[i : i + micro_batch_size], policy.pad_token_id)
        for i in range(0, len(samples), micro_batch_size)
    ]
    total_tokens = float(sum(float(b.response_mask.sum()) for b in batches))
    loss = trained_log_prob = 0.0
    with torch.no_grad():
        for batch in batches:
            log_probs = sequence_log_probs(policy.model, batch)
            value, _ = clipped_policy_loss(
                log_probs, log_probs, batch.advantages, batch.response_mask, clip_epsilon=0.2,
                token_normaliser=total_tokens,
            )  # fmt: skip
            loss += float(value)
            trained_log_prob += float((log_probs * batch.response_mask).sum())
    return loss, trained_log_prob


def main() -> dict[str, Any]:
    args = parse_args()
    if not args.synthetic and not args.store:
        raise SystemExit("give --store URL (a run's store) or --synthetic")
    config = GRPOConfig(
        group_size=2, tasks_per_step=1, lora_rank=16, learning_rate=1e-6, micro_batch_size=args.micro_batch_size
    )
    policy = build_policy(args.tiny, config)
    if args.synthetic:
        data = synthetic_rollouts(args.rollouts, vocabulary=len(policy.tokenizer))
    else:
        data = asyncio.run(rollouts_from_store(args.store, args.rollouts))
        if not data:
            raise SystemExit(f"no finished training rollout with two or more calls in {args.store}")
    samples = samples_both_ways(data)
    from agentlightning.algorithm.grpo.learning.update import apply_update

    seconds: dict[str, list[float]] = {name: [] for name in samples}
    for _ in range(args.repeats):
        for name, chosen in samples.items():  # alternating, so both forms see the same machine load
            started = time.perf_counter()
            apply_update(policy, chosen, config)
            seconds[name].append(time.perf_counter() - started)
    measured = {
        name: loss_and_trained_log_prob(policy, chosen, args.micro_batch_size) for name, chosen in samples.items()
    }
    calls = [len(item.calls) for item in data]
    result: dict[str, Any] = {
        "commit": current_commit(),
        "load_average_1min": os.getloadavg()[0],
        "source": "synthetic" if args.synthetic else args.store,
        "model": "tiny" if args.tiny else "SmolLM2-135M-Instruct (Q4_1 GGUF de-quantized, fp32), LoRA r=16",
        "shared_prefix": not args.no_shared_prefix,
        "rollouts": len(data),
        "calls_per_rollout": round(statistics.fmean(calls), 3),
        "forms": {},
    }
    for name, chosen in samples.items():
        loss, trained_log_prob = measured[name]
        result["forms"][name] = {
            "samples": len(chosen),
            "sample_tokens": sum(s.length for s in chosen),
            "padded_positions": padded_positions(chosen, args.micro_batch_size),
            "trained_tokens": sum(s.trained_tokens for s in chosen),
            "loss": loss,
            "trained_log_prob": trained_log_prob,
            "update_seconds_median": round(statistics.median(seconds[name]), 3),
            "update_seconds": [round(v, 3) for v in seconds[name]],
        }
    trajectory, transition = result["forms"]["trajectory"], result["forms"]["transition"]
    result["ratios_transition_over_trajectory"] = {
        key: round(transition[key] / trajectory[key], 3)
        for key in ("sample_tokens", "padded_positions", "update_seconds_median")
    }
    result["log_prob_relative_difference"] = abs(trajectory["trained_log_prob"] - transition["trained_log_prob"]) / max(
        abs(transition["trained_log_prob"]), 1e-12
    )
    print(json.dumps(result, indent=2))
    write_results(args.json, sample_figures(result), extra=result)
    return result


def sample_figures(result: dict[str, Any]) -> list[Figure]:
    """One sample per call over multi-turn samples: tokens and update time (target 2x), and the loss difference."""
    ratios = result["ratios_transition_over_trajectory"]
    what = f"{result['rollouts']} {'synthetic' if result['source'] == 'synthetic' else 'stored'} rollouts of " + (
        f"{result['calls_per_rollout']:g} calls, {'tiny model' if result['model'] == 'tiny' else 'SmolLM2-135M'}"
    )
    return [
        Figure(
            key="grpo.multi_turn.tokens_ratio",
            label=f"multi-turn samples: training tokens, one sample per call over multi-turn ({what})",
            value=ratios["sample_tokens"],
            unit="x",
            target=">= 2x fewer",
            met=ratios["sample_tokens"] >= 2,
            detail={"padded_positions_ratio": ratios["padded_positions"]},
        ),
        Figure(
            key="grpo.multi_turn.update_time_ratio",
            label=f"multi-turn samples: update time, one sample per call over multi-turn ({what})",
            value=ratios["update_seconds_median"],
            unit="x",
            target=">= 2x less",
            met=ratios["update_seconds_median"] >= 2,
            detail={
                "statistic": "ratio of the two forms' median update times; rounds: the ratio in each repeat",
                "update_seconds": {name: form["update_seconds"] for name, form in result["forms"].items()},
            },
            rounds=[
                round(transition / trajectory, 3)
                for trajectory, transition in zip(
                    result["forms"]["trajectory"]["update_seconds"],
                    result["forms"]["transition"]["update_seconds"],
                    strict=True,
                )
            ],
        ),
        Figure(
            key="grpo.multi_turn.log_prob_relative_difference",
            label="multi-turn samples: summed log-probability of the trained tokens, relative difference between "
            "the two forms",
            value=result["log_prob_relative_difference"],
            unit="",
            target="the same (< 1e-5)",
            met=result["log_prob_relative_difference"] < 1e-5,
            higher_is_better=False,
            detail={"loss": {name: form["loss"] for name, form in result["forms"].items()}},
        ),
    ]


if __name__ == "__main__":
    main()
