"""Each step checks how the proxy's recorded calls sampled against the temperature the training assumes."""

from __future__ import annotations

from typing import Any

import pytest

from agentlightning.algorithm.grpo.rollouts.sampling_check import count_mismatches, recorded_sampling
from agentlightning.llm_proxy.record import CallRecord
from agentlightning.types import Span


def _proxy_span(**request: Any) -> Span:
    record = CallRecord("ro-1", "at-1", "chat", {"model": "m", "messages": [], **request}, "http://up", False)
    record.finish(response={"choices": []}, status_code=200)
    return record.to_span(1)


def test_calls_at_the_configured_temperature_are_not_mismatches() -> None:
    counts = count_mismatches(recorded_sampling([_proxy_span(temperature=0.7)] * 3), 0.7)
    assert counts.to_dict() == {"calls": 3, "temperature": 0, "top_p": 0, "top_k": 0}
    assert not counts.any


def test_another_temperature_and_a_missing_one_are_counted() -> None:
    spans = [_proxy_span(temperature=0.2), _proxy_span(), _proxy_span(temperature=0.7)]
    counts = count_mismatches(recorded_sampling(spans), 0.7)
    assert (counts.calls, counts.temperature) == (3, 2)  # no temperature sent: the server samples at 1.0


def test_a_request_without_temperature_matches_a_configured_one() -> None:
    assert count_mismatches(recorded_sampling([_proxy_span()]), 1.0).temperature == 0


def test_top_p_below_one_and_top_k_are_counted() -> None:
    spans = [_proxy_span(temperature=1.0, top_p=0.9), _proxy_span(temperature=1.0, top_p=1.0, top_k=20)]
    counts = count_mismatches(recorded_sampling(spans), 1.0)
    assert (counts.top_p, counts.top_k, counts.any) == (1, 1, True)


def test_spans_that_are_not_the_proxys_are_ignored() -> None:
    client_side = Span.from_attributes(
        attributes={"gen_ai.request.model": "m", "gen_ai.request.temperature": 0.1}, name="openai.chat.completion"
    )
    assert recorded_sampling([client_side]) == []


def test_the_update_computes_log_probs_at_the_configured_temperature(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from agentlightning.algorithm.grpo.config import GRPOConfig
    from agentlightning.algorithm.grpo.learning import update
    from agentlightning.algorithm.grpo.learning.loss import Sample
    from agentlightning.algorithm.grpo.learning.policy import Policy
    from agentlightning.inference.tiny import build_tiny_engine

    seen: list[float] = []
    original = update.sequence_log_probs

    def recording(model: Any, batch: Any, temperature: float = 1.0, **options: Any) -> Any:
        seen.append(temperature)
        return original(model, batch, temperature, **options)

    monkeypatch.setattr(update, "sequence_log_probs", recording)
    config = GRPOConfig(temperature=0.6, ppo_epochs=2, kl_coef=0.1, lora_rank=4, learning_rate=1e-2)
    policy = Policy.from_engine(build_tiny_engine(seed=0), config)
    update.apply_update(policy, [Sample([2, 10], [12, 13], 1.0), Sample([2, 10], [14], -1.0)], config)
    assert seen and set(seen) == {0.6}  # old, reference and current log-probs alike
