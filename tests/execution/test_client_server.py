"""The client-server strategy with real processes: configuration, runner processes, clear errors."""

from __future__ import annotations

import multiprocessing
import socket
import time
from typing import Any

import psutil
import pytest

import agentlightning as agl
from agentlightning.execution import ClientServerExecutionStrategy, MultiprocessingEvent
from agentlightning.execution.child import ChildStore
from agentlightning.execution.processes import ProcessGroup, RunnerProcess
from agentlightning.execution.signals import stop_processes
from agentlightning.execution.supervisor import Slot
from agentlightning.store.delegating import DelegatingStore

from ..runner.agents import PidAgent, ScriptedAgent
from .helpers import (
    EnqueueAllAlgorithm,
    UnloadableBundle,
    die_on_sigint,
    exit_on_sigint,
    exit_with,
    ignore_sigint_then_sleep,
    wait_for_stop_or_30_s,
)


def _children() -> list[psutil.Process]:
    """Child processes, except multiprocessing's resource tracker (it exits with this process)."""
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if "resource_tracker" not in " ".join(child.cmdline())
    ]


# ------------------------------------------------------------------------------------------- configuration
def test_role_host_and_port_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_CURRENT_ROLE", "runner")
    monkeypatch.setenv("AGL_SERVER_HOST", "10.0.0.5")
    monkeypatch.setenv("AGL_SERVER_PORT", "5000")
    strategy = ClientServerExecutionStrategy()
    assert (strategy.role, strategy.server_host, strategy.server_port) == ("runner", "10.0.0.5", 5000)
    assert ClientServerExecutionStrategy(role="both", server_port=6000).server_port == 6000


def test_defaults_are_role_both_and_a_free_port(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGL_CURRENT_ROLE", "AGL_SERVER_HOST", "AGL_SERVER_PORT", "AGL_MANAGED_STORE"):
        monkeypatch.delenv(name, raising=False)
    strategy = ClientServerExecutionStrategy()
    assert (strategy.role, strategy.server_host, strategy.server_port, strategy.managed_store) == (
        "both",
        "127.0.0.1",
        0,
        True,
    )
    assert ClientServerExecutionStrategy(role="algorithm").server_port == 4747


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("AGL_SERVER_PORT", "abc", "AGL_SERVER_PORT must be an integer"),
        ("AGL_CURRENT_ROLE", "driver", "role must be"),
        ("AGL_MANAGED_STORE", "maybe", "AGL_MANAGED_STORE"),
    ],
)
def test_bad_environment_values_are_named(monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=message):
        ClientServerExecutionStrategy()


def test_invalid_combinations_are_rejected() -> None:
    with pytest.raises(ValueError, match="main_process='runner' requires"):
        ClientServerExecutionStrategy(main_process="runner", n_runners=2)
    with pytest.raises(ValueError, match="n_runners"):
        ClientServerExecutionStrategy(n_runners=0)


# ------------------------------------------------------------------------------------------------ processes
def test_fit_with_two_runner_processes_runs_every_rollout_and_leaves_no_process() -> None:
    algorithm = EnqueueAllAlgorithm(timeout=90)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, progress="off")
    trainer.fit(PidAgent(), [{"sleep": 0.05} for _ in range(30)])
    assert len(algorithm.finished) == 30 and all(r.status == "succeeded" for r in algorithm.finished)
    assert trainer.summary is not None and trainer.summary.snapshot.succeeded == 30
    assert _children() == []


def test_an_agent_that_cannot_reach_runner_processes_is_reported_before_starting() -> None:
    class LocalAgent(agl.LitAgent[Any]):
        def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
            return 1.0

    trainer = agl.Trainer(algorithm=EnqueueAllAlgorithm(), n_runners=1, progress="off")
    with pytest.raises(TypeError, match="cannot be sent to the runner processes"):
        trainer.fit(LocalAgent(), [{}])
    assert _children() == []


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        trainer = agl.Trainer(algorithm=EnqueueAllAlgorithm(), n_runners=1, port=port, progress="off")
        with pytest.raises(RuntimeError, match=rf"{port}.*Choose another port"):
            trainer.fit(ScriptedAgent(), [{}])
    assert _children() == []


def test_an_unknown_strategy_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="Unknown execution strategy 'threads'"):
        agl.Trainer(strategy="threads")


async def test_runner_role_serves_an_external_store_server(monkeypatch: pytest.MonkeyPatch) -> None:
    store = agl.InMemoryLightningStore()
    server = agl.LightningStoreServer(store, host="127.0.0.1", port=0)
    await server.start()
    try:
        ids = [(await store.enqueue_rollout({"reward": 0.5})).rollout_id for _ in range(4)]
        monkeypatch.setenv("AGL_CURRENT_ROLE", "runner")
        monkeypatch.setenv("AGL_SERVER_PORT", str(server.port))
        trainer = agl.Trainer(n_runners=2, max_rollouts=2, progress="off")
        import asyncio

        await asyncio.to_thread(trainer.fit, ScriptedAgent())
        finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=10)
        assert [r.status for r in finished] == ["succeeded"] * 4
    finally:
        await server.stop()
    assert _children() == []


# --------------------------------------------------------------------------------------------- escalation
@pytest.mark.parametrize(
    ("target", "args", "expected"),
    [
        (exit_on_sigint, (), 0),
        (ignore_sigint_then_sleep, (False,), -15),
        (ignore_sigint_then_sleep, (True,), -9),
    ],
    ids=["stops-on-sigint", "needs-sigterm", "needs-sigkill"],
)
def test_stopping_escalates_from_sigint_to_sigterm_to_sigkill(target: Any, args: Any, expected: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    process = ctx.Process(target=target, args=(ready, *args))
    process.start()
    assert ready.wait(60)  # the child installed its signal handlers
    started = time.monotonic()
    assert stop_processes([process], first_wait=0.1, step_timeout=1.0) == []
    assert process.exitcode == expected
    assert time.monotonic() - started < 5


def _group_of(*targets: tuple[Any, tuple[Any, ...]]) -> ProcessGroup:
    """A process group whose children run the given test targets instead of runners."""
    ctx = multiprocessing.get_context("spawn")
    group = ProcessGroup(
        ctx, b"", ChildStore(url="http://127.0.0.1:1"), MultiprocessingEvent(ctx=ctx), [], graceful_timeout=0.2
    )
    for index, (target, args) in enumerate(targets):
        ready = ctx.Event()
        process = ctx.Process(target=target, args=(ready, *args))
        process.start()
        assert ready.wait(60)
        group.slots.append(Slot(index, RunnerProcess(process, ready)))
    return group


def test_runners_stopped_by_signal_after_the_run_are_not_reported_as_failed(caplog: pytest.LogCaptureFixture) -> None:
    group = _group_of((die_on_sigint, ()))
    group.shutdown()
    assert group.processes[0].exitcode == -2  # killed by the SIGINT of the shutdown
    group.check_exit_codes()  # no RuntimeError: the run was over, the runner only failed to stop in time
    assert "were stopped by signal" in caplog.text


def test_a_runner_that_exited_with_an_error_by_itself_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    group = _group_of((exit_with, (3,)), (die_on_sigint, ()))
    group.processes[0].join(60)
    group.shutdown()
    with pytest.raises(RuntimeError, match=r"Runner processes failed: Process-\d+ \(exit code 3\)|exit code 3"):
        group.check_exit_codes()


def test_a_runner_that_cannot_load_its_agent_stops_the_run_with_its_reason() -> None:
    strategy = ClientServerExecutionStrategy(n_runners=1)
    with pytest.raises(RuntimeError, match=r"runner-0 exited with exit code 2 before it started"):
        strategy.execute(wait_for_stop_or_30_s, UnloadableBundle(), agl.InMemoryLightningStore())
    assert _children() == []


class UsersOwnStore(DelegatingStore):
    """A user's LightningStore subclass that declares no capabilities (not async-safe)."""

    def __init__(self) -> None:
        self.inner = agl.InMemoryLightningStore()

    async def _forward(self, operation: str, arguments: dict[str, Any]) -> Any:
        return await getattr(self.inner, operation)(**arguments)


def test_a_store_not_marked_async_safe_is_served_to_runner_processes() -> None:
    store = UsersOwnStore()
    assert not store.capabilities.get("async_safe")
    algorithm = EnqueueAllAlgorithm(timeout=60)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=1, store=store, progress="off")
    trainer.fit(ScriptedAgent(), [{"reward": 0.5}] * 3)
    assert [rollout.status for rollout in algorithm.finished] == ["succeeded"] * 3
    assert _children() == []


def test_a_server_host_of_localhost_is_served_and_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_SERVER_HOST", "localhost")
    algorithm = EnqueueAllAlgorithm(timeout=60)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=1, progress="off")
    assert isinstance(trainer.strategy, ClientServerExecutionStrategy) and trainer.strategy.server_host == "localhost"
    trainer.fit(ScriptedAgent(), [{"reward": 0.5}] * 2)
    assert [rollout.status for rollout in algorithm.finished] == ["succeeded"] * 2
