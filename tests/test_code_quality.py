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


@pytest.mark.timeout(900)  # a whole-package type check takes minutes on a loaded 2-core machine
def test_pyright_finds_no_type_errors() -> None:
    result = subprocess.run([_tool("pyright")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_import_does_not_load_heavy_optional_modules() -> None:
    heavy = ["opentelemetry.sdk.trace", "fastapi", "uvicorn", "aiohttp", "torch", "transformers", "psutil"]
    code = f"import sys, agentlightning; loaded = [m for m in {heavy!r} if m in sys.modules]; print(','.join(loaded))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def _markdown_python_blocks() -> list[tuple[str, str]]:
    import re

    files = sorted(ROOT.glob("docs/*.md")) + sorted(ROOT.glob("*.md")) + sorted(ROOT.glob("examples/**/*.md"))
    blocks: list[tuple[str, str]] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"```python\n(.*?)```", text, re.S):
            line = text[: match.start()].count("\n") + 1
            blocks.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


def test_markdown_python_blocks_are_valid_python_without_top_level_await() -> None:
    # A block a reader pastes into a script must run there: `await` belongs inside `async def main()` + `asyncio.run`.
    problems: list[str] = []
    for where, block in _markdown_python_blocks():
        try:
            compile(block, where, "exec")
        except SyntaxError as exc:
            problems.append(f"{where}: {exc.msg}")
    assert not problems, "\n".join(problems)


def test_markdown_python_blocks_are_ruff_formatted() -> None:
    ruff = _tool("ruff")
    problems: list[str] = []
    for where, block in _markdown_python_blocks():
        result = subprocess.run(
            [ruff, "format", "--diff", "--stdin-filename", "docs_block.py", "-"],
            cwd=ROOT,
            input=block,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            problems.append(f"{where}:\n{result.stdout}{result.stderr}")
    assert not problems, "\n".join(problems)
