"""Padding-aware batches, exact-token log-probabilities and the clipped GRPO loss against hand-computed values."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agentlightning.algorithm.grpo.learning.loss import (  # noqa: E402
    Sample,
    clipped_policy_loss,
    make_batch,
    sequence_log_probs,
)


def test_batch_pads_on_the_right_and_masks_only_response_predictions() -> None:
    batch = make_batch([Sample([5, 6], [7], 1.0), Sample([5], [8, 9, 10], -1.0)], pad_token_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 7, 0], [5, 8, 9, 10]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    # predictions: position t predicts token t+1; row 0 predicts 7 at t=1; row 1 predicts 8, 9, 10 at t=0..2
    assert batch.response_mask.tolist() == [[0, 1, 0], [1, 1, 1]]
    assert batch.advantages.tolist() == [[0.0, 1.0, 0.0], [-1.0, -1.0, -1.0]]


def test_batch_masks_tokens_the_model_did_not_generate() -> None:
    # prompt [5], then a generated token 7, a tool result 3 4 (not generated), a generated 9
    batch = make_batch([Sample([5], [7, 3, 4, 9], 2.0, loss_mask=[1, 0, 0, 1])], pad_token_id=0)
    assert batch.response_mask.tolist() == [[1, 0, 0, 1]]


def test_batch_carries_per_token_advantages() -> None:
    sample = Sample([5], [7, 3, 9], 0.0, loss_mask=[1, 0, 1], token_advantages=[0.5, 0.0, -1.5])
    batch = make_batch([sample], pad_token_id=0)
    assert batch.advantages.tolist() == [[0.5, 0.0, -1.5]]


def test_sample_rejects_a_mask_of_the_wrong_length() -> None:
    with pytest.raises(ValueError, match="loss_mask has 2 entries for 3 response ids"):
        Sample([5], [7, 8, 9], 1.0, loss_mask=[1, 0])


def test_empty_prompt_or_response_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        make_batch([Sample([], [1], 0.0)], pad_token_id=0)


class _Uniform(torch.nn.Module):
    """A 'model' whose next-token distribution is fixed: logits[v] = v (softmax over a vocabulary of 4)."""

    def forward(self, input_ids, attention_mask=None, position_ids=None):  # type: ignore[no-untyped-def]
        logits = torch.arange(4, dtype=torch.float32).expand(*input_ids.shape, 4)
        return type("Out", (), {"logits": logits})()


def test_log_probs_are_those_of_the_exact_next_tokens() -> None:
    batch = make_batch([Sample([0], [3, 1], 1.0)], pad_token_id=0)
    values = sequence_log_probs(_Uniform(), batch)
    log_z = math.log(sum(math.exp(v) for v in range(4)))
    assert values[0].tolist() == pytest.approx([3 - log_z, 1 - log_z])


def test_log_probs_are_those_of_the_distribution_sampled_at_the_temperature() -> None:
    batch = make_batch([Sample([0], [3, 1], 1.0)], pad_token_id=0)
    values = sequence_log_probs(_Uniform(), batch, temperature=2.0)
    log_z = math.log(sum(math.exp(v / 2.0) for v in range(4)))
    assert values[0].tolist() == pytest.approx([3 / 2.0 - log_z, 1 / 2.0 - log_z])


def test_log_probs_refuse_a_temperature_that_is_not_positive() -> None:
    batch = make_batch([Sample([0], [3], 1.0)], pad_token_id=0)
    with pytest.raises(ValueError, match="temperature"):
        sequence_log_probs(_Uniform(), batch, temperature=0.0)


def test_loss_with_ratio_one_is_minus_the_mean_advantage_per_token() -> None:
    lp = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    loss, metrics = clipped_policy_loss(lp, lp, torch.tensor([2.0, -1.0]), mask, clip_epsilon=0.2)
    # tokens: 2, 2, -1 -> -(2 + 2 - 1) / 3
    assert float(loss) == pytest.approx(-1.0)
    assert metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["clip_fraction"] == 0.0


def test_sequence_aggregation_averages_each_sequence_first() -> None:
    lp = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    loss, _ = clipped_policy_loss(lp, lp, torch.tensor([2.0, -1.0]), mask, clip_epsilon=0.2, aggregation="sequence")
    assert float(loss) == pytest.approx(-(2.0 - 1.0) / 2)


def test_ratio_is_clipped_for_positive_advantages_above_one_plus_epsilon() -> None:
    old = torch.zeros(1, 1)
    new = torch.full((1, 1), math.log(1.5))  # ratio 1.5
    mask = torch.ones(1, 1)
    loss, metrics = clipped_policy_loss(new, old, torch.tensor([1.0]), mask, clip_epsilon=0.2)
    assert float(loss) == pytest.approx(-1.2)  # min(1.5 * 1, 1.2 * 1)
    assert metrics["clip_fraction"] == 1.0


def test_negative_advantage_keeps_the_unclipped_larger_penalty() -> None:
    old = torch.zeros(1, 1)
    new = torch.full((1, 1), math.log(1.5))
    loss, _ = clipped_policy_loss(new, old, torch.tensor([-1.0]), torch.ones(1, 1), clip_epsilon=0.2)
    assert float(loss) == pytest.approx(1.5)  # -min(-1.5, -1.2)


def test_kl_penalty_uses_the_non_negative_estimator() -> None:
    lp = torch.zeros(1, 1)
    ref = torch.full((1, 1), math.log(0.5))  # delta = log 0.5 -> 0.5 - log 0.5 - 1
    loss, metrics = clipped_policy_loss(
        lp, lp, torch.tensor([0.0]), torch.ones(1, 1), clip_epsilon=0.2, ref_log_probs=ref, kl_coef=0.1
    )
    kl = 0.5 - math.log(0.5) - 1
    assert metrics["kl"] == pytest.approx(kl)
    assert float(loss) == pytest.approx(0.1 * kl)


def test_gradient_pushes_up_positive_advantage_tokens() -> None:
    logits = torch.zeros(4, requires_grad=True)
    lp = torch.log_softmax(logits, -1)[2].view(1, 1)
    loss, _ = clipped_policy_loss(lp, lp.detach(), torch.tensor([1.0]), torch.ones(1, 1), clip_epsilon=0.2)
    loss.backward()
    assert logits.grad is not None and float(logits.grad[2]) < 0  # descending the loss raises token 2's logit


# ------------------------------------------------------------------------- shared prefixes, response-only logits
def _tiny_policy() -> tuple:
    from agentlightning.algorithm.grpo.config import GRPOConfig
    from agentlightning.algorithm.grpo.learning.policy import Policy
    from agentlightning.inference.tiny import build_tiny_engine

    return Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig(lora_rank=4, learning_rate=1e-3))


def _shared_samples() -> list[Sample]:
    prefix = [5 + (i * 7) % 80 for i in range(40)]  # a system prompt all rows share
    return [
        Sample([*prefix, 11, 12, 13], [20, 21, 22, 23], 1.0),
        Sample([*prefix, 14, 15], [24, 25], -0.5, loss_mask=[1, 0]),
        Sample([*prefix, 16, 17, 18, 19, 30], [26, 27, 28], 0.25),
    ]


def _masked_log_probs_and_grads(policy, batch) -> tuple:  # type: ignore[no-untyped-def]
    policy.model.zero_grad(set_to_none=True)
    log_probs = sequence_log_probs(policy.model, batch)
    (log_probs * batch.response_mask).sum().backward()
    grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.requires_grad and p.grad is not None}
    return (log_probs * batch.response_mask).detach(), grads


def test_rows_sharing_a_prefix_run_it_once_with_the_same_log_probs_and_gradients() -> None:
    import dataclasses

    policy = _tiny_policy()
    batch = make_batch(_shared_samples(), pad_token_id=0)
    assert batch.shared_prefix == 40 and batch.first_prediction == 41
    shared_lp, shared_grads = _masked_log_probs_and_grads(policy, batch)
    whole = dataclasses.replace(batch, shared_prefix=0, first_prediction=0)  # every row run whole, every logit
    whole_lp, whole_grads = _masked_log_probs_and_grads(policy, whole)
    assert torch.allclose(shared_lp, whole_lp, atol=1e-5)
    assert shared_grads.keys() == whole_grads.keys() and shared_grads
    for name, grad in shared_grads.items():
        assert torch.allclose(grad, whole_grads[name], rtol=1e-4, atol=1e-6), name


def test_a_prefix_is_shared_only_before_every_rows_first_trained_prediction() -> None:
    prefix = list(range(5, 45))
    samples = [Sample(prefix, [50, 51], 1.0), Sample(prefix, [50, 52], -1.0)]  # same prompt: a GRPO group
    batch = make_batch(samples, pad_token_id=0)
    assert batch.first_prediction == 39 and batch.shared_prefix == 39
    assert make_batch([Sample(prefix[:10], [1], 1.0), Sample(prefix[:10], [2], 1.0)], 0).shared_prefix == 0


def test_micro_batches_bound_rows_and_padded_tokens() -> None:
    from agentlightning.algorithm.grpo.learning.update import micro_batches

    samples = [Sample([1] * n, [2], 1.0) for n in (9, 9, 9, 29, 9, 99, 9)]  # lengths 10, 10, 10, 30, 10, 100, 10
    chunks = micro_batches(samples, max_rows=2, max_tokens=60)
    assert [[s.length for s in chunk] for chunk in chunks] == [[10, 10], [10, 30], [10], [100], [10]]
    assert [len(c) for c in micro_batches(samples, max_rows=8, max_tokens=10_000)] == [7]


def test_prefix_order_puts_interleaved_conversations_of_one_kind_together() -> None:
    from agentlightning.algorithm.grpo.learning.update import micro_batches, prefix_order

    main, summary = list(range(100, 140)), list(range(200, 240))  # two conversation kinds, 40 shared ids each
    arrival = [Sample((main if i % 2 == 0 else summary) + [i], [7, 8], 1.0) for i in range(8)]  # rollout by rollout
    assert all(make_batch(chunk, 0).shared_prefix == 0 for chunk in micro_batches(arrival, 4, 10_000))
    ordered = prefix_order(arrival)
    assert sorted(map(id, ordered)) == sorted(map(id, arrival))  # the same samples, none lost or repeated
    chunks = micro_batches(ordered, 4, 10_000)
    assert [make_batch(chunk, 0).shared_prefix for chunk in chunks] == [40, 40]


def test_update_in_prefix_order_computes_the_same_gradient_as_in_arrival_order() -> None:
    from agentlightning.algorithm.grpo.learning.update import prefix_order

    policy = _tiny_policy()
    main, summary = list(range(5, 45)), list(range(50, 90))
    arrival = [
        Sample((main if i % 2 == 0 else summary) + [i + 3], [60 + i, 61], 1.0 if i % 3 else -1.0) for i in range(6)
    ]

    def gradients(samples: list[Sample]) -> dict[str, torch.Tensor]:
        policy.model.zero_grad(set_to_none=True)
        for start in range(0, len(samples), 3):
            batch = make_batch(samples[start : start + 3], pad_token_id=0)
            log_probs = sequence_log_probs(policy.model, batch)
            (log_probs * batch.response_mask * batch.advantages).sum().backward()
        return {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}

    before, after = gradients(arrival), gradients(prefix_order(arrival))
    assert before.keys() == after.keys() and before
    for name, grad in before.items():
        assert torch.allclose(grad, after[name], rtol=1e-4, atol=1e-6), name


def test_update_chunks_never_mix_conversation_kinds_in_one_micro_batch() -> None:
    from agentlightning.algorithm.grpo.learning.update import update_chunks

    main, summary = list(range(100, 140)), list(range(200, 240))
    arrival = [Sample((main if i % 3 else summary) + [i], [7, 8], 1.0) for i in range(9)]  # 6 main, 3 summaries
    chunks = update_chunks(arrival, max_rows=4, max_tokens=10_000)
    assert [len(chunk) for chunk in chunks] == [4, 2, 3]  # the main conversations, then the summaries: never mixed
    assert [make_batch(chunk, 0).shared_prefix for chunk in chunks] == [40, 40, 40]
    assert sorted(id(s) for chunk in chunks for s in chunk) == sorted(map(id, arrival))


def test_an_opening_every_sample_shares_counts_once_against_the_token_budget() -> None:
    from agentlightning.algorithm.grpo.learning.update import micro_batches, shared_opening, update_chunks

    opening = list(range(100, 500))  # 400 ids of system prompt, tools and worked examples: every call starts so
    samples = [Sample([*opening, i, i + 1], [7] * 20, 1.0) for i in range(16)]  # 422 positions each
    assert shared_opening(samples) == 400
    assert len(micro_batches(samples, max_rows=16, max_tokens=4096)) == 2  # padded rows x longest: 9 rows fit
    assert [len(c) for c in update_chunks(samples, max_rows=16, max_tokens=4096)] == [16]  # 400 + 16 x 22 positions
    assert [len(c) for c in update_chunks(samples, max_rows=16, max_tokens=600)] == [9, 7]  # 400 + 9 x 22 <= 600
    assert [make_batch(c, 0).shared_prefix for c in update_chunks(samples, 16, 600)] == [400, 400]


def test_a_lone_sample_or_a_short_common_opening_shares_nothing() -> None:
    from agentlightning.algorithm.grpo.learning.update import shared_opening

    assert shared_opening([Sample(list(range(100)), [1], 1.0)]) == 0
    assert (
        shared_opening([Sample(list(range(10)) + [1] * 50, [1], 1.0), Sample(list(range(10)) + [2] * 50, [1], 1.0)])
        == 0
    )
