"""The short soak (benchmarks/soak.py) in the test suite: rollouts with spans through a real store server process,
client processes that open a client per `asyncio.run` and share one span writer; descriptors must stay flat,
everything must be stored, and the writers must let go of every store and add no exit handler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.store.postgres_support import require_postgres

SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"


def soak(backend: str, env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, str(SOAK), "--backend", backend, "--rollouts", "400", "--clients", "2"]
    command += ["--tasks-per-loop", "20", "--interval", "0.2", "--print-json"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    assert lines, f"soak.py printed no result (exit {out.returncode}): {out.stderr[-3000:]}"
    return json.loads(lines[-1])


@pytest.mark.parametrize("backend", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_short_soak_keeps_descriptors_flat_and_loses_nothing(backend: str) -> None:
    env = dict(os.environ)
    if backend == "postgres":
        env["AGL_SOAK_POSTGRES"] = require_postgres()
    result = soak(backend, env)
    assert (result["rollouts"], result["spans"]) == (400, 1600)
    assert result["flat"], result["problems"]
    assert result["samples"] >= 3
    assert not result["rss_judged"]  # 400 rollouts are too few to judge RSS; the full soak does
