"""A runner whose tracer must capture a framework that is not installed stops at once with the install command on
one line: no traceback per runner process, no restarts that would fail the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys

sys.modules["langchain_core"] = None  # as if the langchain extra were not installed (runner processes run this too)

import agentlightning as agl


@agl.rollout
def agent(task, llm):
    return 1.0


if __name__ == "__main__":
    trainer = agl.Trainer(
        n_runners=1,
        tracer=agl.OtelTracer(instrument=["langchain"]),
        initial_resources={"llm": agl.LLM(endpoint="http://127.0.0.1:9/v1", model="m")},
    )
    try:
        trainer.dev(agent, train_dataset=[{"q": 1}])
    except RuntimeError as exc:
        print(f"the run stopped: {exc}", file=sys.stderr)
        sys.exit(1)
"""


@pytest.mark.slow
def test_a_runner_that_cannot_capture_its_framework_stops_with_the_install_command(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    hints = [line for line in output.splitlines() if "pip install 'agentlightning[langchain]'" in line]
    assert len(hints) == 1 and "runner-0 cannot start: Cannot instrument langchain" in hints[0], output
    assert "Traceback" not in output and "Replacing runner-0" not in output, output
