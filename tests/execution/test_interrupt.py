"""Ctrl-C on a real `fit` process tree stops everything within seconds, with no orphan, no traceback but the
KeyboardInterrupt's own, a consistent store and a summary that matches it; `fit` then raises KeyboardInterrupt, so the
script ends as interrupted (exit status 130) instead of carrying on as if training had completed."""

from __future__ import annotations

import asyncio
import contextlib
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
    _kill_tree(process)
    raise AssertionError(f"the run did not start: {process.stderr.read() if process.stderr else ''}")


def _kill_tree(process: subprocess.Popen[str]) -> None:
    """SIGKILL the run, its process group and any child that left the group."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _communicate_or_dump_stacks(process: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """The run's output once it exits; when it does not exit within `timeout`, its threads' stacks (faulthandler,
    SIGUSR1) in the failure message, and the whole tree killed so that no later test sees a leftover process."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGUSR1)
        time.sleep(1.0)
        _kill_tree(process)
        stdout, stderr = process.communicate()
        raise AssertionError(f"the run did not stop within {timeout} s; stdout:\n{stdout}\nstderr:\n{stderr}") from None


@pytest.mark.parametrize("target", ["process-group", "parent-only"])
def test_ctrl_c_stops_the_whole_tree_quickly_and_cleanly(tmp_path: Path, target: str) -> None:
    db = tmp_path / "run.db"
    process = _start(db)
    try:
        _interrupt_and_check(process, db, target)
    finally:
        if process.poll() is None:
            _kill_tree(process)


def _interrupt_and_check(process: subprocess.Popen[str], db: Path, target: str) -> None:
    tree = psutil.Process(process.pid).children(recursive=True)
    runners = [child for child in tree if "resource_tracker" not in " ".join(child.cmdline())]
    assert len(runners) == 2
    started = time.monotonic()
    if target == "process-group":
        os.killpg(process.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    else:
        os.kill(process.pid, signal.SIGINT)
    stdout, stderr = _communicate_or_dump_stacks(process, timeout=30)
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
