"""The code base stays lint- and type-clean, and the package imports quickly without optional dependencies."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; it is part of the test extras")
    return found


def test_ruff_finds_no_lint_errors() -> None:
    result = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = subprocess.run([_tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pyright_finds_no_type_errors() -> None:
    result = subprocess.run([_tool("pyright")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_import_does_not_load_heavy_optional_modules() -> None:
    heavy = ["opentelemetry.sdk.trace", "fastapi", "uvicorn", "aiohttp", "torch", "transformers", "psutil"]
    code = f"import sys, agentlightning; loaded = [m for m in {heavy!r} if m in sys.modules]; print(','.join(loaded))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
