"""Choosing the device and the reduced precision: "auto" follows CUDA's availability, the CPU never touches CUDA."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from agentlightning.utils.device import (  # noqa: E402
    DeviceError,
    autocast,
    compute_dtype,
    resolve_device,
    validate_device_name,
    validate_precision,
)


def _never() -> Any:
    raise AssertionError("CUDA was asked about on the CPU path")


def test_auto_is_cuda_when_available_and_the_cpu_otherwise() -> None:
    assert resolve_device("auto", cuda_available=lambda: True) == torch.device("cuda", 0)
    assert resolve_device("auto", cuda_available=lambda: False) == torch.device("cpu")


def test_the_cpu_is_chosen_without_asking_cuda_anything() -> None:
    assert resolve_device("cpu", cuda_available=_never, cuda_count=_never) == torch.device("cpu")


def test_cuda_on_a_machine_without_it_is_refused_with_what_to_do() -> None:
    with pytest.raises(DeviceError, match=r"device='cuda' needs CUDA, which is not available here.*device='auto'"):
        resolve_device("cuda", cuda_available=lambda: False)


def test_a_cuda_index_beyond_the_visible_gpus_is_refused() -> None:
    assert resolve_device("cuda:1", cuda_available=lambda: True, cuda_count=lambda: 2) == torch.device("cuda", 1)
    with pytest.raises(DeviceError, match=r"device='cuda:2' does not exist: 2 CUDA device\(s\) visible"):
        resolve_device("cuda:2", cuda_available=lambda: True, cuda_count=lambda: 2)


@pytest.mark.parametrize("name", ["gpu", "cuda:", "CPU", "", None, 0])
def test_names_torch_cannot_take_are_refused(name: Any) -> None:
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda', 'cuda:N'"):
        validate_device_name(name)


def test_bfloat16_is_used_only_on_cuda_devices_that_support_it() -> None:
    assert compute_dtype(torch.device("cuda", 0), bf16_supported=lambda: True) is torch.bfloat16
    assert compute_dtype(torch.device("cuda", 0), bf16_supported=lambda: False) is None
    assert compute_dtype(torch.device("cpu"), bf16_supported=_never) is None


def test_bfloat16_asked_for_explicitly_autocasts_on_the_cpu_too() -> None:
    assert compute_dtype(torch.device("cpu"), "bfloat16", bf16_supported=_never) is torch.bfloat16


def test_float32_asked_for_explicitly_never_autocasts_even_on_a_bf16_gpu() -> None:
    assert compute_dtype(torch.device("cuda", 0), "float32", bf16_supported=lambda: True) is None


@pytest.mark.parametrize("name", ["bf16", "fp32", "float16", "", None])
def test_precisions_other_than_auto_float32_and_bfloat16_are_refused(name: Any) -> None:
    with pytest.raises(ValueError, match="precision must be one of 'auto', 'float32', 'bfloat16', got"):
        validate_precision(name)


def test_no_autocast_at_all_in_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "autocast", _never)
    with autocast(torch.device("cpu"), None):
        assert torch.ones(2).sum() == 2


def test_autocast_runs_the_block_in_the_reduced_precision() -> None:
    # bfloat16 autocast exists on the CPU too, which shows the mechanism without a GPU
    with autocast(torch.device("cpu"), torch.bfloat16):
        product = torch.ones(2, 2) @ torch.ones(2, 2)
    assert product.dtype is torch.bfloat16
