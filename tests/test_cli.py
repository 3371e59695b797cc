"""The `agl` command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentlightning.cli import main


def test_demo_walks_through_the_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "attempts ['failed', 'succeeded']" in out
    assert "3 rollouts, 4 attempts, 7 spans" in out


def test_unknown_command_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fly"]) == 2
    assert "unknown command 'fly'" in capsys.readouterr().err


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out


def test_module_entry_point_runs() -> None:
    result = subprocess.run([sys.executable, "-m", "agentlightning", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "usage: agl" in result.stdout


def test_demo_against_a_shared_server_touches_only_its_own_rollouts(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from agentlightning.store import InMemoryLightningStore
    from agentlightning.types import LLM

    from .store.http.conftest import start_server, stop_server

    store = InMemoryLightningStore()
    server = start_server(store)
    try:

        async def populate() -> tuple[list[str], str]:
            resources = await store.add_resources({"llm": LLM(endpoint="http://127.0.0.1:9/v1", model="real")})
            foreign = [await store.enqueue_rollout(f"not a dict {i}") for i in range(2)]
            return [rollout.rollout_id for rollout in foreign], resources.resources_id

        foreign_ids, resources_id = asyncio.run(populate())
        assert main(["demo", "--store", server.endpoint]) == 0
        out = capsys.readouterr().out
        assert "attempts ['failed', 'succeeded']" in out

        async def inspect() -> None:
            for rollout_id in foreign_ids:
                rollout = await store.get_rollout_by_id(rollout_id)
                assert rollout is not None and rollout.status == "queuing"
                assert list(await store.query_attempts(rollout_id)) == []
            latest = await store.get_latest_resources()
            assert latest is not None and latest.resources_id == resources_id
            first = await store.dequeue_rollout()
            assert first is not None and first.rollout_id == foreign_ids[0]  # the queue order is intact

        asyncio.run(inspect())
    finally:
        stop_server(server)


def test_serve_help_states_each_default_once_and_never_shows_the_api_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGL_INFERENCE_API_KEY", "secret-key-from-env")
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "(default: None)" not in out
    assert "secret-key-from-env" not in out
    assert "(default: $AGL_INFERENCE_API_KEY, else no key)" in out
    assert "(default: the model's name, see --model)" in out
    assert "(default: 8000)" in out  # a default the help text does not state is still shown
