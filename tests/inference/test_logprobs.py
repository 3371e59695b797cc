"""Batched, padding-aware log-probs of given completions (for training)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

from agentlightning.inference.logprobs import sequence_logprobs  # noqa: E402
from agentlightning.inference.sampling import SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402


def test_log_probs_match_what_the_engine_reported_while_sampling() -> None:
    engine = build_tiny_engine(seed=0)
    prompt = engine.chat_prompt([{"role": "user", "content": "What is 2+2?"}])
    sample = engine.generate(prompt, SamplingParams(max_tokens=10, temperature=1.0, seed=3, logprobs=True))[0]
    with torch.no_grad():
        logprobs, mask = sequence_logprobs(engine.model, [prompt], [sample.token_ids])
    assert mask.tolist() == [[1.0] * len(sample.token_ids)]
    assert logprobs[0].tolist() == pytest.approx([e.logprob for e in sample.logprobs], abs=1e-4)


def test_the_engine_reports_the_log_probs_of_the_distribution_it_sampled_at_the_temperature() -> None:
    engine = build_tiny_engine(seed=0)
    prompt = engine.chat_prompt([{"role": "user", "content": "What is 2+2?"}])
    sample = engine.generate(prompt, SamplingParams(max_tokens=10, temperature=0.5, seed=3, logprobs=True))[0]
    with torch.no_grad():
        logprobs, _ = sequence_logprobs(engine.model, [prompt], [sample.token_ids], temperature=0.5)
    assert logprobs[0].tolist() == pytest.approx([e.logprob for e in sample.logprobs], abs=1e-4)


def test_each_row_of_a_padded_batch_equals_the_row_alone() -> None:
    engine = build_tiny_engine(seed=0)
    prompts = [engine.encode("Hello there, how are you?"), engine.encode("Hi")]
    completions = [engine.encode("fine"), engine.encode("good day to you")]
    with torch.no_grad():
        batched, mask = sequence_logprobs(engine.model, prompts, completions, pad_token_id=0)
        alone = [sequence_logprobs(engine.model, [p], [c])[0][0] for p, c in zip(prompts, completions, strict=True)]
    assert mask.sum(dim=1).tolist() == [4.0, 15.0]
    assert batched[0, :4].tolist() == pytest.approx(alone[0].tolist(), abs=1e-5)
    assert batched[1].tolist() == pytest.approx(alone[1].tolist(), abs=1e-5)
    assert batched[0, 4:].abs().sum().item() == 0


def test_gradients_flow_to_the_parameters() -> None:
    engine = build_tiny_engine(seed=0)
    logprobs, mask = sequence_logprobs(engine.model, [engine.encode("ab")], [engine.encode("cd")])
    (-(logprobs * mask).sum()).backward()
    assert engine.model.model.embed_tokens.weight.grad is not None


def test_temperature_scales_the_logits() -> None:
    engine = build_tiny_engine(seed=0)
    with torch.no_grad():
        cold = sequence_logprobs(engine.model, [engine.encode("ab")], [engine.encode("cd")], temperature=0.5)[0]
        warm = sequence_logprobs(engine.model, [engine.encode("ab")], [engine.encode("cd")])[0]
    assert not torch.allclose(cold, warm)


@pytest.mark.parametrize(
    "prompts, completions, message",
    [([[1]], [], "1 prompts but 0"), ([[]], [[1]], "Prompt 0 is empty"), ([[1]], [[]], "Completion 0 is empty")],
)
def test_bad_batches_are_rejected(prompts: list[list[int]], completions: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sequence_logprobs(build_tiny_engine().model, prompts, completions)
