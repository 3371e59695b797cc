"""The issue's "done when": `Trainer(n_runners=4, store="sqlite:///run.db").fit(agent, train)` with a plain
OpenAI-SDK agent against the local inference server (tiny random model), run as a script like a user would."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import agentlightning as agl

pytest.importorskip("torch", reason="the local inference server needs the inference extra")
pytest.importorskip("openai", reason="the example agent uses the openai extra")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_plain_openai_example_trains_with_four_runner_processes_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plain_openai_agent.py"), "--tiny", "--db", str(db), "--tasks", "8"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mean reward:" in result.stdout
    assert "Traceback" not in result.stderr

    async def inspect() -> tuple[list[str], set[str], int]:
        store = agl.store_from_url(f"sqlite:///{db}")
        try:
            rollouts = await store.query_rollouts()
            workers = set()
            rewards = 0
            for rollout in rollouts:
                for attempt in await store.query_attempts(rollout.rollout_id):
                    workers.add(attempt.worker_id or "")
                if agl.find_final_reward(await store.query_spans(rollout.rollout_id)) is not None:
                    rewards += 1
            return [r.status for r in rollouts], workers, rewards
        finally:
            await store.close()

    statuses, workers, rewards = asyncio.run(inspect())
    assert statuses == ["succeeded"] * 8
    assert rewards == 8
    assert len(workers) >= 2  # the work was spread over several runner processes
