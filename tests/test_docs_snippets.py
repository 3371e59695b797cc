"""The Python snippets a user copies from README.md and docs/ run as written.

Two checks:
- every snippet in README.md and docs/*.md that starts a Trainer (`.fit(` / `.dev(` / `Trainer(`) does it under
  `if __name__ == "__main__":` (runner processes are spawned and import the script again);
- every complete script (it starts with an import and ends in `asyncio.run(...)` or an `if __name__ == "__main__":`
  block) of README.md, docs/runtime.md, docs/algorithms.md, docs/capture.md and docs/train-your-agent.md is run in a
  fresh process, in an empty folder, against the fake OpenAI-compatible server (tests/fake_openai_server.py). The
  only changes made to the text: the local model address `http://127.0.0.1:8000/v1` becomes the fake server's,
  runner counts become 1, GRPO trains the tiny random model (`agentlightning.inference.tiny`) for one step of one
  group of 2 instead of SmolLM2 for some minutes, and `OPENAI_BASE_URL` / `OPENAI_API_KEY` point the OpenAI client
  at the fake server. A snippet whose first line is `# file: NAME.py` is a module the page's scripts import: it is
  written into the folder as NAME.py before each script of its page runs.

Not run (the reason is checked to still apply): the VERL example (verl and GPUs), and the scripts of http.md,
llm_proxy.md and stores.md (fixed ports, a PostgreSQL host).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_FROM = {"README.md", "runtime.md", "algorithms.md", "capture.md", "train-your-agent.md"}
NOT_RUN = {"agl.VERL(": "needs verl and NVIDIA GPUs"}
LOCAL_MODEL = "http://127.0.0.1:8000/v1"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_FILE = re.compile(r"# file: (\w+\.py)\n")


def _snippets(paths: list[Path]) -> Iterator[tuple[str, str]]:
    for path in paths:
        text = path.read_text()
        for match in _BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            yield f"{path.name}:{line}", match.group(1)


def _modules_of(page: str) -> dict[str, str]:
    """The `# file: NAME.py` snippets of `page` (a file name in docs/ or README.md): {NAME.py: code}."""
    path = next(p for p in DOCS if p.name == page)
    return {match.group(1): code for _, code in _snippets([path]) if (match := _FILE.match(code))}


def _is_script(code: str) -> bool:
    first = code.lstrip().splitlines()[0] if code.strip() else ""
    return first.startswith(("import ", "from ")) and ("asyncio.run(" in code or "__main__" in code)


def _runnable() -> list[tuple[str, str]]:
    found = []
    for name, code in _snippets([p for p in DOCS if p.name in RUN_FROM]):
        if _is_script(code) and not any(marker in code for marker in NOT_RUN):
            found.append((name, code))
    return found


def test_snippets_start_the_trainer_only_under_a_main_guard() -> None:
    offenders = []
    for name, code in _snippets(DOCS):
        for line in code.splitlines():
            if re.match(r"^\w[\w.]*\.(fit|dev)\(", line) or re.match(r"^\w+ = (agl\.)?Trainer\(", line):
                offenders.append(f"{name}: {line.strip()}")
    assert offenders == []


def test_the_snippets_that_are_run_cover_the_training_ones() -> None:
    names = {name.split(":")[0] for name, code in _runnable() if ".fit(" in code}
    assert names == {"README.md", "runtime.md", "algorithms.md", "train-your-agent.md"}
    assert len([1 for _, code in _runnable() if "= agl.APO(" in code or "= agl.GRPO(" in code]) == 3


def _prepare(code: str, base_url: str) -> str:
    code = code.replace(LOCAL_MODEL, base_url)
    code = re.sub(r"n_runners=\d+", "n_runners=1", code)
    if "agl.GRPO(" in code:
        code = code.replace("agl.GRPO(", "agl.GRPO(engine=_tiny_engine(), ")
        code = re.sub(r"max_minutes=\d+", "max_steps=1", code)
        code = re.sub(r"group_size=\d+", "group_size=2", code)
        code = re.sub(r"tasks_per_step=\d+", "tasks_per_step=1", code)
        code = "from agentlightning.inference.tiny import build_tiny_engine as _tiny_engine\n" + code
    return code


@pytest.fixture(scope="module")
def fake_server() -> Iterator[str]:
    from .fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server.base_url


@pytest.mark.parametrize(("name", "code"), _runnable(), ids=[name for name, _ in _runnable()])
def test_the_snippet_runs(name: str, code: str, fake_server: str, tmp_path: Path) -> None:
    if "agl.GRPO(" in code:
        pytest.importorskip("torch")
    for module, text in _modules_of(name.split(":")[0]).items():
        (tmp_path / module).write_text(text)
    script = tmp_path / "snippet.py"
    script.write_text(_prepare(code, fake_server))
    timeout = 420 if "agl.GRPO(" in code else 280  # a GRPO run evaluates its held-out tasks before and after
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OPENAI_BASE_URL": fake_server,
        "OPENAI_API_KEY": "test",
    }
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
