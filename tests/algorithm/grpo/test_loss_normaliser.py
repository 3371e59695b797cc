"""The loss normaliser (`loss_normaliser`): "tokens" divides by what the update holds, "constant" (Dr. GRPO) by what a
step is configured to hold, a number by itself; micro-batches accumulate to the same loss and gradient either way."""

from __future__ import annotations

import pytest

from agentlightning.algorithm.grpo import GRPOConfig
from agentlightning.algorithm.grpo.learning.normaliser import loss_normalisers


def test_tokens_divide_by_the_updates_tokens_and_samples() -> None:
    assert loss_normalisers(GRPOConfig(), samples=5, tokens=37.0) == (37.0, 5.0)


def test_constant_divides_by_the_configured_completions_and_response_tokens() -> None:
    config = GRPOConfig(loss_normaliser="constant", group_size=4, tasks_per_step=3, max_response_tokens=64)
    assert loss_normalisers(config, samples=5, tokens=37.0) == (64.0 * 12, 12.0)
    assert loss_normalisers(config, samples=12, tokens=700.0) == (64.0 * 12, 12.0)  # whatever the step kept


def test_a_number_is_the_divisor() -> None:
    assert loss_normalisers(GRPOConfig(loss_normaliser=250.0), samples=5, tokens=37.0) == (250.0, 250.0)


@pytest.mark.parametrize("value", ["mean", 0, -1.0, float("inf"), True])
def test_a_bad_normaliser_is_rejected_with_its_name(value: object) -> None:
    with pytest.raises(ValueError, match="loss_normaliser"):
        GRPOConfig(loss_normaliser=value)  # type: ignore[arg-type]


def _samples() -> list:
    from agentlightning.algorithm.grpo.learning.loss import Sample

    # 3 trained tokens with advantage +1 (two) and -1 (one), one masked out
    return [Sample([2, 10], [12, 13], 1.0), Sample([2, 11], [14, 15], -1.0, loss_mask=[1, 0])]


def test_the_constant_normalised_loss_at_ratio_one_is_minus_the_advantage_sum_over_the_constant() -> None:
    torch = pytest.importorskip("torch")
    from agentlightning.algorithm.grpo.learning.loss import clipped_policy_loss, make_batch

    config = GRPOConfig(loss_normaliser="constant", group_size=2, tasks_per_step=1, max_response_tokens=4)
    batch = make_batch(_samples(), pad_token_id=0)
    token_normaliser, sequence_normaliser = loss_normalisers(config, 2, float(batch.response_mask.sum()))
    zeros = torch.zeros_like(batch.advantages)
    args = (zeros, zeros, batch.advantages, batch.response_mask)
    token, _ = clipped_policy_loss(*args, clip_epsilon=0.2, token_normaliser=token_normaliser)
    assert float(token) == pytest.approx(-(1 + 1 - 1) / 8)  # -(sum of A over trained tokens) / (4 tokens x 2)
    sequence, _ = clipped_policy_loss(
        *args, clip_epsilon=0.2, aggregation="sequence", sequence_normaliser=sequence_normaliser
    )
    assert float(sequence) == pytest.approx(-(1 - 1) / 2)  # per-sequence means 1 and -1, over 2 completions


@pytest.mark.parametrize("normaliser", ["tokens", "constant"])
@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_micro_batches_accumulate_to_the_loss_and_gradient_of_one_pass(normaliser: str, aggregation: str) -> None:
    torch = pytest.importorskip("torch")
    from agentlightning.algorithm.grpo.learning.loss import Sample
    from agentlightning.algorithm.grpo.learning.policy import Policy
    from agentlightning.algorithm.grpo.learning.update import apply_update
    from agentlightning.inference.tiny import build_tiny_engine

    samples = [Sample([2, 10 + i], [12 + i] * (1 + i), 1.0 - 0.5 * i) for i in range(4)]
    results = []
    for micro_batch_size in (1, 8):
        torch.manual_seed(0)
        config = GRPOConfig(
            lora_rank=4,
            learning_rate=1e-3,
            loss_normaliser=normaliser,  # type: ignore[arg-type]
            loss_aggregation=aggregation,  # type: ignore[arg-type]
            micro_batch_size=micro_batch_size,
            device="cpu",
        )
        policy = Policy.from_engine(build_tiny_engine(seed=0), config)
        results.append(apply_update(policy, samples, config))
    assert results[0]["loss"] == pytest.approx(results[1]["loss"], rel=1e-5, abs=1e-7)
    assert results[0]["grad_norm"] == pytest.approx(results[1]["grad_norm"], rel=1e-4)
    assert results[0]["grad_norm"] > 0
