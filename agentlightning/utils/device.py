"""Where training and serving tensors live: a device chosen once (`"auto"`: CUDA when available, else the CPU) and
the reduced precision its matrix multiplications may use.

The CPU path never touches CUDA: `torch.cuda` is asked only whether it is available, and only for `"auto"` or a
`"cuda..."` device. Reduced precision is bfloat16 autocast on CUDA devices that support it (compute capability 8+):
parameters, gradients and optimizer state stay float32 (master weights), only the forward passes' matrix
multiplications run in bfloat16. On the CPU nothing changes: float32 throughout, no autocast, unless bfloat16 is
asked for explicitly (`precision="bfloat16"`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEVICE_PATTERN",
    "PRECISIONS",
    "DeviceError",
    "autocast",
    "compute_dtype",
    "resolve_device",
    "validate_device_name",
    "validate_precision",
]

DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|(cuda|xpu)(:\d+)?)$")


class DeviceError(ValueError):
    """The requested device does not exist here (e.g. CUDA on a machine without it); the message says what to do."""


def validate_device_name(name: Any) -> str:
    """`name` if it is a device torch can name (auto, cpu, cuda, cuda:N, mps, xpu, xpu:N); ValueError otherwise."""
    if not isinstance(name, str) or not DEVICE_PATTERN.match(name):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N', 'mps' or 'xpu', got {name!r}")
    return name


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _cuda_count() -> int:
    import torch

    return int(torch.cuda.device_count())


def resolve_device(
    name: str = "auto",
    *,
    cuda_available: Callable[[], bool] = _cuda_available,
    cuda_count: Callable[[], int] = _cuda_count,
) -> torch.device:
    """The torch device `name` stands for; `"auto"` is CUDA (device 0) when available, else the CPU.

    Raises DeviceError for a CUDA device on a machine without CUDA (or with fewer GPUs than the index asks for).
    """
    import torch

    validate_device_name(name)
    if name == "auto":
        return torch.device("cuda", 0) if cuda_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not cuda_available():
            raise DeviceError(
                f"device={name!r} needs CUDA, which is not available here (torch {torch.__version__}, built with "
                f"CUDA {torch.version.cuda or 'none'}): use device='auto' or 'cpu', or check the GPU driver and "
                "CUDA_VISIBLE_DEVICES"
            )
        index = 0 if device.index is None else device.index
        count = cuda_count()
        if index >= count:
            raise DeviceError(f"device={name!r} does not exist: {count} CUDA device(s) visible")
        return torch.device("cuda", index)
    return device


def _bf16_supported() -> bool:
    import torch

    return bool(torch.cuda.is_bf16_supported())


PRECISIONS = ("auto", "float32", "bfloat16")


def validate_precision(name: Any) -> str:
    """`name` if it is one of PRECISIONS; ValueError naming the choices otherwise."""
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(repr(p) for p in PRECISIONS)}, got {name!r}")
    return str(name)


def compute_dtype(
    device: torch.device, precision: str = "auto", *, bf16_supported: Callable[[], bool] = _bf16_supported
) -> Optional[Any]:
    """The dtype forward passes on `device` autocast to, or None (float32, no autocast).

    `precision` "auto": bfloat16 on CUDA devices that support it, else None; "float32": None; "bfloat16":
    bfloat16 on any device, the CPU included (emulated, hence slow, on CPUs without AVX512-BF16 or AMX).
    """
    import torch

    validate_precision(precision)
    if precision == "bfloat16":
        return torch.bfloat16
    if precision == "auto" and device.type == "cuda" and bf16_supported():
        return torch.bfloat16
    return None


@contextlib.contextmanager
def autocast(device: torch.device, dtype: Optional[Any]) -> Iterator[None]:
    """Autocast the block's forward passes to `dtype` on `device`; nothing at all when `dtype` is None."""
    if dtype is None:
        yield
        return
    import torch

    with torch.autocast(device_type=device.type, dtype=dtype):
        yield
