"""A GRPO run killed with SIGKILL continues from its last checkpoint when started again with the same directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]


def _start(run_dir: Path, max_steps: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.algorithm.grpo.kill_target", str(run_dir), str(max_steps)],
        cwd=ROOT,
        start_new_session=True,  # the run and its runner processes form one process group
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_run_killed_after_a_checkpoint_resumes_from_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    process = _start(run_dir, 1000)
    latest = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + 300
    while not latest.exists():  # the checkpoint pointer is the event we wait for
        assert process.poll() is None, process.stderr.read().decode()[-2000:] if process.stderr else ""
        assert time.monotonic() < deadline, "no checkpoint written within 300 s"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    killed_at = int(latest.read_text().strip().split("-")[1])
    assert not (run_dir / "result.json").exists()

    again = _start(run_dir, killed_at + 2)
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr.decode()[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["resumed_from"].endswith(f"step-{killed_at:06d}")
    assert result["steps"] == list(range(1, killed_at + 3))
    assert "GRPO resumed from" in stderr.decode()


def test_ctrl_c_during_an_update_finishes_it_saves_and_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    process = _start(run_dir, 1000)
    marker = run_dir / "updating"
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None, process.stderr.read().decode()[-2000:] if process.stderr else ""
        assert time.monotonic() < deadline, "no update started within 300 s"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGINT)  # Ctrl-C reaches the trainer's process
    _, stderr = process.communicate(timeout=300)
    text = stderr.decode()
    assert "GRPO interrupted" in text, text[-3000:]
    saved = int((run_dir / "checkpoints" / "latest").read_text().strip().split("-")[1])
    assert saved >= 1  # the update that was running completed and was saved as its step

    again = _start(run_dir, saved + 1)
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr.decode()[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["resumed_from"].endswith(f"step-{saved:06d}")
