"""benchmarks/gpu_smoke.py refuses clearly where it cannot run (a machine without CUDA, a CPU device, no model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests._scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_smoke.py"


def gpu_smoke() -> ModuleType:
    return load_script(SCRIPT, "benchmarks_gpu_smoke")


def test_a_machine_without_cuda_is_refused_with_exit_code_2(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "gpu_smoke: no CUDA GPU here" in result.stderr and "bash scripts/train.sh" in result.stderr


def test_a_cpu_device_is_refused_before_anything_loads(tmp_path: Path) -> None:
    script = gpu_smoke()
    assert script.refusal(script.parse_args([str(tmp_path), "--device", "cpu"])) == (
        "--device 'cpu': this smoke test is for a CUDA GPU (use cuda or cuda:N)"
    )


def test_a_folder_without_a_model_is_refused_when_cuda_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    script = gpu_smoke()
    problem = script.refusal(script.parse_args([str(tmp_path)]))
    assert problem == f"{tmp_path} is not a Hugging Face model folder (no config.json)"
