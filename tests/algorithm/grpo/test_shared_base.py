"""One copy of the model: a policy that trains the tensors its in-process inference engine serves (shared_base.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentlightning.algorithm.grpo.config import GRPOConfig  # noqa: E402
from agentlightning.algorithm.grpo.learning.agent_policy import AgentPolicies  # noqa: E402
from agentlightning.algorithm.grpo.learning.loss import Sample  # noqa: E402
from agentlightning.algorithm.grpo.learning.policy import Policy  # noqa: E402
from agentlightning.algorithm.grpo.learning.shared_base import rounding_bound  # noqa: E402
from agentlightning.algorithm.grpo.learning.update import apply_update  # noqa: E402
from agentlightning.algorithm.grpo.serving.inference_server import LocalServing  # noqa: E402
from agentlightning.inference.engine import InferenceEngine  # noqa: E402
from agentlightning.inference.sampling import SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402

SAMPLES = [Sample([2, 10, 11], [12, 13], 1.0), Sample([2, 10, 11], [14], -1.0)]
KEY = "model.layers.0.self_attn.q_proj.weight"


def _config(**settings: Any) -> GRPOConfig:
    return GRPOConfig.from_kwargs(**{"learning_rate": 1e-2, "lora_rank": 4, "device": "cpu", **settings})


def _shared(engine: InferenceEngine, **settings: Any) -> Policy:
    torch.manual_seed(0)  # the LoRA initialisation
    return Policy.from_engine(engine, _config(**settings), share_base=True)


def _copied(**settings: Any) -> Policy:
    torch.manual_seed(0)
    return Policy.from_engine(build_tiny_engine(seed=0), _config(**settings))


def _pointers(model: Any) -> set[int]:
    return {parameter.data_ptr() for parameter in model.parameters()}


def _base_pointers(policy: Any) -> set[int]:
    return {p.data_ptr() for name, p in policy.model.named_parameters() if "lora_" not in name}


def _served(engine: InferenceEngine) -> dict[str, Any]:
    return {name: tensor.clone() for name, tensor in engine.model.state_dict().items()}


def _generate_in_thread(engine: InferenceEngine) -> tuple[threading.Thread, list[Any]]:
    results: list[Any] = []
    params = SamplingParams(max_tokens=2, temperature=0.0)
    thread = threading.Thread(target=lambda: results.append(engine.generate([2, 10, 11], params)), daemon=True)
    thread.start()
    return thread, results


def test_a_shared_policy_trains_the_engines_own_tensors() -> None:
    engine = build_tiny_engine(seed=0)
    policy = _shared(engine)
    assert policy.shared is not None
    assert _base_pointers(policy) == _pointers(engine.model)  # one copy: the same storages


def test_a_policy_keeps_its_own_copy_unless_sharing_is_asked_for() -> None:
    engine = build_tiny_engine(seed=0)
    policy = Policy.from_engine(engine, _config())
    assert policy.shared is None and not _base_pointers(policy) & _pointers(engine.model)


def test_a_bfloat16_engine_keeps_its_own_copy() -> None:
    engine = build_tiny_engine(seed=0)
    engine.model.to(torch.bfloat16)
    policy = _shared(engine)
    assert policy.shared is None and not _base_pointers(policy) & _pointers(engine.model)
    assert all(p.dtype == torch.bfloat16 for p in engine.model.parameters())  # the engine's model is left as it was


def test_after_publish_the_engine_serves_the_policys_merged_weights() -> None:
    engine = build_tiny_engine(seed=0)
    policy, twin = _shared(engine), _copied()
    base = _served(engine)
    apply_update(policy, SAMPLES, policy.config)
    apply_update(twin, SAMPLES, twin.config)
    LocalServing(engine, shared=policy.shared).publish(policy, "v1")
    served, expected = _served(engine), twin.inference_state_dict()
    assert engine.weights_version == "v1"
    assert not torch.equal(served[KEY], base[KEY])  # the update reached the engine
    assert all(torch.allclose(served[k], expected[k], rtol=0, atol=1e-6) for k in expected)


def test_a_full_fine_tune_shares_its_tensors_and_serves_them_after_publish() -> None:
    engine = build_tiny_engine(seed=0)
    policy = _shared(engine, lora_rank=None)
    base = _served(engine)
    apply_update(policy, SAMPLES, policy.config)
    LocalServing(engine, shared=policy.shared).publish(policy, "v1")
    assert _pointers(policy.model) == _pointers(engine.model)
    assert engine.weights_version == "v1" and not torch.equal(_served(engine)[KEY], base[KEY])


def test_no_generation_runs_from_an_update_until_its_publish() -> None:
    engine = build_tiny_engine(seed=0)
    policy = _shared(engine)
    apply_update(policy, SAMPLES, policy.config)
    assert policy.shared is not None and policy.shared.claimed and not policy.lora_merged
    thread, results = _generate_in_thread(engine)
    thread.join(timeout=0.5)
    assert not results  # waiting: the weights are unmerged
    LocalServing(engine, shared=policy.shared).publish(policy, "v1")
    thread.join(timeout=30)
    assert results and results[0][0].weights_version == "v1"


def test_an_update_waits_for_running_sequences_to_finish_on_the_old_weights() -> None:
    engine = build_tiny_engine(seed=0)
    policy = _shared(engine, lora_rank=None)  # a full fine-tune: the optimizer writes the served tensors directly
    params = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True, logprobs=True)

    def logprobs(sequence: Any) -> list[float]:
        return [entry.logprob for entry in sequence.logprobs]

    expected = logprobs(build_tiny_engine(seed=0).generate([2, 10, 11], params)[0])
    stream = engine.stream([2, 10, 11], params)
    next(stream)  # running now
    updated = threading.Event()
    thread = threading.Thread(target=lambda: (apply_update(policy, SAMPLES, policy.config), updated.set()))
    thread.start()
    last = list(stream)[-1]
    thread.join(timeout=60)
    assert updated.is_set() and last[0].weights_version == "base"
    assert logprobs(last[0]) == pytest.approx(expected, abs=1e-5)  # every token from the old weights
    LocalServing(engine, shared=policy.shared).publish(policy, "v1")
    after = logprobs(engine.generate([2, 10, 11], params)[0])
    assert after != pytest.approx(expected, abs=1e-3)  # the update did change the weights


def test_stopping_the_serving_between_an_update_and_its_publish_lets_generation_resume() -> None:
    engine = build_tiny_engine(seed=0)
    policy = _shared(engine)
    serving = LocalServing(engine, shared=policy.shared)
    apply_update(policy, SAMPLES, policy.config)
    serving.stop()
    thread, results = _generate_in_thread(engine)
    thread.join(timeout=30)
    assert results and policy.lora_merged and engine.weights_version == "base"


def test_repeated_publishes_move_the_base_weights_within_the_rounding_bound() -> None:
    engine = build_tiny_engine(seed=0)
    policy = _shared(engine)
    assert policy.shared is not None
    with torch.no_grad():  # a delta as large as the weights themselves, so merging crosses binades often
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.5)
    policy.shared.claim()
    initial = {k: v.clone() for k, v in _served(engine).items() if "layers" in k}
    policy.shared.serve("v0")
    merged = {k: _served(engine)[k] for k in initial}
    rounds = 200
    for round_ in range(rounds):
        policy.shared.claim()
        policy.shared.serve(f"v{round_ + 1}")
    policy.shared.claim()
    final = {k: _served(engine)[k] for k in initial}
    policy.shared.serve("last")
    moved = total = 0
    for key in initial:
        distance = (final[key] - initial[key]).abs()
        assert bool((distance <= rounding_bound(initial[key], merged[key], rounds)).all()), key
        moved += int((distance > 0).sum())
        total += distance.numel()
    assert moved < total / 2  # most elements come back exactly after every round


def test_saving_the_merged_model_of_a_shared_policy_writes_the_served_weights(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    engine = build_tiny_engine(seed=0)
    policy = _shared(engine)
    apply_update(policy, SAMPLES, policy.config)
    LocalServing(engine, shared=policy.shared).publish(policy, "v1")
    served = _served(engine)
    policy.save_merged(tmp_path / "merged")
    saved = load_file(str(tmp_path / "merged" / "model.safetensors"))
    assert torch.equal(saved[KEY], served[KEY])
    assert policy.lora_merged and torch.equal(_served(engine)[KEY], served[KEY])  # still served, merged once


def test_a_checkpoint_loaded_into_a_shared_policy_is_served_after_publish(tmp_path: Path) -> None:
    trained = _copied()
    apply_update(trained, SAMPLES, trained.config)
    trained.save_model(tmp_path / "model")
    engine = build_tiny_engine(seed=0)
    policy = _shared(engine)
    policy.load_model(tmp_path / "model")
    assert policy.shared is not None and policy.shared.claimed  # generation waits for the publish
    LocalServing(engine, shared=policy.shared).publish(policy, "step-1")
    expected = trained.inference_state_dict()
    assert torch.allclose(_served(engine)[KEY], expected[KEY], rtol=0, atol=1e-6)


def test_several_agents_train_their_adapters_on_the_engines_own_base() -> None:
    engine = build_tiny_engine(seed=0)
    policies = AgentPolicies.from_engine(engine, _config(), ["solver", "reviewer"])
    assert _base_pointers(policies) == _pointers(engine.model)
