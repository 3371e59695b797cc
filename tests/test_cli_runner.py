"""`agl runner`: runners that join a store by URL from another process (or machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentlightning as agl

ROOT = Path(__file__).resolve().parents[1]


def _agl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentlightning", "runner", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def test_two_runner_processes_join_a_store_server_by_url() -> None:
    import asyncio

    store = agl.InMemoryLightningStore()
    server = agl.LightningStoreServer(store, host="127.0.0.1", port=0)
    await server.start()
    try:
        ids = [(await store.enqueue_rollout({"reward": 0.25})).rollout_id for _ in range(4)]
        result = await asyncio.to_thread(
            _agl,
            "--store",
            server.endpoint,
            "--agent",
            "tests.runner.agents:ScriptedAgent",
            "--n-runners",
            "2",
            "--max-rollouts",
            "2",
        )
        assert result.returncode == 0, result.stderr
        finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=5)
        assert [r.status for r in finished] == ["succeeded"] * 4
        workers = {attempt.worker_id for r in finished for attempt in await store.query_attempts(r.rollout_id)}
        assert len(workers) == 2 and all(w and "-runner-" in w for w in workers)
    finally:
        await server.stop()


def test_an_unreachable_store_fails_with_the_url_after_the_connect_timeout() -> None:
    result = _agl(
        "--store", "http://127.0.0.1:9", "--agent", "tests.runner.agents:ScriptedAgent", "--connect-timeout", "1"
    )
    assert result.returncode == 3
    assert "http://127.0.0.1:9" in result.stderr and "connect_timeout" in result.stderr


def test_bad_arguments_are_named() -> None:
    result = _agl("--store", "http://127.0.0.1:9", "--agent", "tests.runner.agents:Missing")
    assert result.returncode == 2 and "Missing" in result.stderr
    result = _agl("--store", "memory://", "--agent", "tests.runner.agents:ScriptedAgent")
    assert result.returncode == 2 and "in-memory store" in result.stderr


def test_several_runners_on_an_unreachable_store_exit_3_and_the_parent_opens_no_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import agentlightning.store.url as url_module
    from agentlightning.cli import runner as cli_runner

    def no_store_here(url: str) -> Any:
        raise AssertionError("the parent of runner processes opened a store it never uses")

    monkeypatch.setattr(url_module, "store_from_url", no_store_here)
    monkeypatch.chdir(ROOT)
    code = cli_runner.main(
        [
            "--store",
            "http://127.0.0.1:9",
            "--agent",
            "tests.runner.agents:ScriptedAgent",
            "--n-runners",
            "2",
            "--connect-timeout",
            "1",
            "--log-level",
            "error",
        ]
    )
    assert code == 3
    assert "http://127.0.0.1:9" in capsys.readouterr().err
