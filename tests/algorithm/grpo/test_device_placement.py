"""Every tensor of the policy, its optimizer and its batches lives on the chosen device; the CPU path never touches
CUDA (checked by making every CUDA entry point fail)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from agentlightning.algorithm.grpo.config import GRPOConfig  # noqa: E402
from agentlightning.algorithm.grpo.learning.loss import Sample, make_batch  # noqa: E402
from agentlightning.algorithm.grpo.learning.policy import Policy  # noqa: E402
from agentlightning.algorithm.grpo.learning.update import apply_update  # noqa: E402
from agentlightning.inference.engine import InferenceEngine  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402
from agentlightning.utils.device import DeviceError  # noqa: E402

SAMPLES = [Sample([2, 10, 11], [12, 13], 1.0), Sample([2, 10, 11], [14], -1.0)]


def _fail(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("CUDA was used on the CPU path")


def test_a_batch_is_built_on_the_requested_device() -> None:
    batch = make_batch(SAMPLES, pad_token_id=0, device=torch.device("meta"))  # a device that is not the CPU
    tensors = (batch.input_ids, batch.attention_mask, batch.response_mask, batch.advantages)
    assert {tensor.device.type for tensor in tensors} == {"meta"}


def test_a_batch_stays_on_the_cpu_without_a_device() -> None:
    batch = make_batch(SAMPLES, pad_token_id=0)
    assert batch.input_ids.device == torch.device("cpu")


@pytest.mark.parametrize("lora_rank", [None, 4])
def test_training_on_the_cpu_never_touches_cuda_and_keeps_float32(
    monkeypatch: pytest.MonkeyPatch, lora_rank: Any
) -> None:
    for name in ("is_available", "is_bf16_supported", "device_count", "current_device", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, _fail)
    monkeypatch.setattr(torch, "autocast", _fail)
    policy = Policy.from_engine(
        build_tiny_engine(seed=0), GRPOConfig(device="cpu", learning_rate=1e-2, lora_rank=lora_rank)
    )
    metrics = apply_update(policy, SAMPLES, policy.config)
    assert metrics["grad_norm"] > 0
    assert policy.device == torch.device("cpu") and policy.compute_dtype is None
    parameters = list(policy.model.parameters())
    assert {p.device.type for p in parameters} == {"cpu"} and {p.dtype for p in parameters} == {torch.float32}
    state = [t for s in policy.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    assert state and {t.device.type for t in state} == {"cpu"}


def test_bfloat16_precision_autocasts_the_cpu_policy_and_keeps_float32_master_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("is_available", "is_bf16_supported", "device_count", "current_device", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, _fail)
    config = GRPOConfig(device="cpu", learning_rate=1e-2, lora_rank=4, precision="bfloat16")
    policy = Policy.from_engine(build_tiny_engine(seed=0), config)
    assert policy.compute_dtype is torch.bfloat16
    with policy.autocast():
        assert torch.get_autocast_dtype("cpu") is torch.bfloat16 and torch.is_autocast_enabled("cpu")
    metrics = apply_update(policy, SAMPLES, policy.config)
    assert metrics["grad_norm"] > 0
    assert {p.dtype for p in policy.model.parameters()} == {torch.float32}


@pytest.mark.parametrize(("precision", "expected"), [("bfloat16", torch.bfloat16), ("float32", None)])
def test_one_adapter_per_agent_honours_precision_as_the_single_policy_does(precision: str, expected: Any) -> None:
    pytest.importorskip("peft")
    from agentlightning.algorithm.grpo.learning.agent_policy import AgentPolicies, run_agent_updates

    config = GRPOConfig(device="cpu", learning_rate=1e-2, lora_rank=4, precision=precision)
    policies = AgentPolicies.from_engine(build_tiny_engine(seed=0), config, ["solver", "reviewer"])
    single = Policy.from_engine(build_tiny_engine(seed=0), config)
    assert policies.compute_dtype is expected and single.compute_dtype is expected
    with policies.view("solver").autocast():
        assert torch.is_autocast_enabled("cpu") is (expected is not None)
    metrics = run_agent_updates(policies, {"solver": SAMPLES}, config)
    assert metrics["solver.grad_norm"] > 0
    assert {p.dtype for p in policies.model.parameters()} == {torch.float32}


def test_a_precision_grpo_does_not_know_is_refused_when_configured() -> None:
    with pytest.raises(ValueError, match="precision must be one of"):
        GRPOConfig(precision="fp16")


def test_auto_trains_on_the_cpu_when_cuda_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    policy = Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig(device="auto"))
    assert policy.device == torch.device("cpu")


def test_auto_chooses_cuda_and_bfloat16_when_the_gpu_supports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    moved: list[Any] = []

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:  # record the move instead of needing a GPU
        moved.append(kwargs.get("device", args[0] if args else None))
        return self

    monkeypatch.setattr(torch.nn.Module, "to", to)
    policy = Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig(device="auto"))
    assert policy.device == torch.device("cuda", 0) and policy.compute_dtype is torch.bfloat16
    assert moved == [torch.device("cuda", 0)]


def test_asking_for_cuda_without_it_fails_before_any_training(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="device='cuda' needs CUDA"):
        Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig(device="cuda"))


def test_a_device_name_torch_cannot_take_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda'"):
        GRPOConfig(device="gpu")


def test_an_engine_runs_where_its_model_is() -> None:
    engine = build_tiny_engine(seed=0)
    assert engine.device == torch.device("cpu")


def test_loading_an_engine_on_cuda_without_it_fails_before_reading_the_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="device='cuda' needs CUDA"):
        InferenceEngine.from_pretrained(tmp_path, device="cuda")
