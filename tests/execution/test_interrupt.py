"""Ctrl-C on a real `fit` process tree stops everything within seconds, with no orphan, no traceback but the
KeyboardInterrupt's own, a consistent store and a summary that matches it; `fit` then raises KeyboardInterrupt, so the
script ends as interrupted (exit status 130) instead of carrying on as if training had completed."""

from __future__ import annotations

import asyncio
import json
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
    assert process.returncode in (-signal.SIGINT, 130), (process.returncode, stderr)  # a shell shows 130
    assert "FIT RETURNED" not in stdout
    assert stderr.count("Traceback") == 1 and stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    (summary_line,) = [line for line in stdout.splitlines() if line.startswith("SUMMARY ")]
    summary = json.loads(summary_line[len("SUMMARY ") :])

    async def statuses() -> list[str]:
        store = agl.store_from_url(f"sqlite:///{db}")
        try:
            return [rollout.status for rollout in await store.query_rollouts()]
        finally:
            await store.close()

    found = asyncio.run(statuses())
    assert set(found) <= {"queuing", "succeeded", "failed", "requeuing"}, found  # nothing left running
    assert summary["running"] == 0
    assert (summary["succeeded"], summary["failed"]) == (found.count("succeeded"), found.count("failed"))
