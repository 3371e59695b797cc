"""Ctrl-C on a real `fit` process tree stops everything within seconds, with no orphan, no traceback, and a
consistent store."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import agentlightning as agl

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("interrupt_fit.py")
ROOT = Path(__file__).resolve().parents[2]


def _start(db: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 90
    for line in process.stdout:
        if line.strip() == "READY":
            return process
        if time.monotonic() > deadline:
            break
    process.kill()
    raise AssertionError(f"the run did not start: {process.stderr.read() if process.stderr else ''}")


@pytest.mark.parametrize("target", ["process-group", "parent-only"])
def test_ctrl_c_stops_the_whole_tree_quickly_and_cleanly(tmp_path: Path, target: str) -> None:
    db = tmp_path / "run.db"
    process = _start(db)
    tree = psutil.Process(process.pid).children(recursive=True)
    runners = [child for child in tree if "resource_tracker" not in " ".join(child.cmdline())]
    assert len(runners) == 2
    started = time.monotonic()
    if target == "process-group":
        os.killpg(process.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    else:
        os.kill(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"took {elapsed:.1f} s"
    _, alive = psutil.wait_procs(tree, timeout=5)
    assert alive == []
    assert "Traceback" not in stderr, stderr
    assert "FIT RETURNED" in stdout

    async def statuses() -> set[str]:
        store = agl.store_from_url(f"sqlite:///{db}")
        try:
            return {rollout.status for rollout in await store.query_rollouts()}
        finally:
            await store.close()

    found = asyncio.run(statuses())
    assert found <= {"queuing", "succeeded", "failed", "requeuing"}, found  # nothing left running
