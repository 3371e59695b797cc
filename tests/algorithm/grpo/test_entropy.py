"""The entropy of the sampling distribution over the trained tokens, measured during the update's forward pass."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agentlightning.algorithm.grpo.learning import entropy as entropy_module  # noqa: E402
from agentlightning.algorithm.grpo.learning.entropy import EntropySum  # noqa: E402
from agentlightning.algorithm.grpo.learning.loss import Sample, make_batch, sequence_log_probs  # noqa: E402


class _Fixed(torch.nn.Module):
    """Next-token logits [0, 1, 2, 3] at every position."""

    def forward(self, input_ids, attention_mask=None, position_ids=None):  # type: ignore[no-untyped-def]
        logits = torch.arange(4, dtype=torch.float32).expand(*input_ids.shape, 4)
        return type("Out", (), {"logits": logits})()


def _entropy_of(logits: list[float]) -> float:
    weights = [math.exp(v) for v in logits]
    total = sum(weights)
    return -sum(w / total * math.log(w / total) for w in weights)


def test_entropy_is_that_of_the_distribution_sampled_at_the_temperature_over_trained_tokens_only() -> None:
    batch = make_batch([Sample([0], [3, 1], 1.0), Sample([0, 1, 2], [2], 1.0, loss_mask=[0])], pad_token_id=0)
    measured = EntropySum()
    sequence_log_probs(_Fixed(), batch, temperature=2.0, entropy=measured)
    assert measured.tokens == 2  # the second row trains on nothing
    assert measured.mean == pytest.approx(_entropy_of([0.0, 0.5, 1.0, 1.5]), abs=1e-6)


def test_entropy_is_the_same_in_small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    logits = torch.randn(3, 5, 7)
    mask = (torch.rand(3, 5) > 0.3).float()
    whole, chunked = EntropySum(), EntropySum()
    whole.add(logits, mask)
    monkeypatch.setattr(entropy_module, "CHUNK_ELEMENTS", 7 * 2)  # two positions per chunk
    chunked.add(logits, mask)
    expected = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)[mask > 0].mean()
    assert whole.mean == pytest.approx(float(expected), abs=1e-5)
    assert chunked.mean == pytest.approx(whole.mean, abs=1e-5) and chunked.tokens == int(mask.sum())


def test_entropy_of_a_certain_token_is_zero_and_of_nothing_is_none() -> None:
    measured = EntropySum()
    assert measured.mean is None
    measured.add(torch.tensor([[[0.0, float("-inf"), float("-inf")]]]), torch.ones(1, 1))
    assert measured.mean == 0.0


def test_a_mask_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="entropy mask of shape"):
        EntropySum().add(torch.zeros(2, 3, 4), torch.ones(2, 2))


def test_an_update_reports_the_entropy_and_the_sampled_tokens_nll() -> None:
    from agentlightning.algorithm.grpo.config import GRPOConfig
    from agentlightning.algorithm.grpo.learning.policy import Policy
    from agentlightning.algorithm.grpo.learning.update import apply_update
    from agentlightning.inference.tiny import build_tiny_engine

    policy = Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig(lora_rank=4, learning_rate=1e-3))
    samples = [Sample([2, 10, 11], [12, 13], 1.0), Sample([2, 10, 11], [14], -1.0)]
    batch = make_batch(samples, policy.pad_token_id, device=policy.device)
    expected = EntropySum()
    with torch.no_grad():
        log_probs = sequence_log_probs(policy.model, batch, policy.config.temperature, expected)
    nll = float(-(log_probs * batch.response_mask).sum() / batch.response_mask.sum())
    metrics = apply_update(policy, samples, policy.config)
    assert metrics["entropy"] == pytest.approx(expected.mean, rel=1e-4)
    assert metrics["sampled_nll"] == pytest.approx(nll, rel=1e-4)
    assert 0 < metrics["entropy"] <= math.log(policy.model.config.vocab_size) + 1e-4
