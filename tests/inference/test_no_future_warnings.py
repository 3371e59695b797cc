"""Serving and training the model print no transformers FutureWarnings (they used to appear in every model
process: `past_key_values` on every decoding step, `is_gradient_checkpointing` when a LoRA policy is built)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from agentlightning.inference.sampling import SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402


def test_generation_with_the_batching_engine_warns_nothing() -> None:
    engine = build_tiny_engine(seed=0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            states = engine.generate([2, 10, 11], SamplingParams(max_tokens=6, temperature=1.0, n=2, ignore_eos=True))
    finally:
        engine.close()
    assert [len(state.token_ids) for state in states] == [6, 6]


def test_building_and_updating_a_lora_policy_warns_nothing() -> None:
    pytest.importorskip("peft")
    from agentlightning.algorithm.grpo.config import GRPOConfig
    from agentlightning.algorithm.grpo.learning.loss import Sample
    from agentlightning.algorithm.grpo.learning.policy import Policy
    from agentlightning.algorithm.grpo.learning.update import apply_update

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        policy = Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig(lora_rank=4, learning_rate=1e-2))
        apply_update(policy, [Sample([2, 10], [12, 13], 1.0), Sample([2, 10], [14], -1.0)], policy.config)
        policy.inference_state_dict()
