"""The Ray strategy on a local Ray instance: 2 runner actors, one killed mid-rollout and replaced."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.types import RolloutConfig

from ..runner.agents import PidAgent
from .helpers import EnqueueAllAlgorithm

ray = pytest.importorskip("ray", reason="the Ray strategy needs the ray extra: pip install 'agentlightning[ray]'")

pytestmark = pytest.mark.slow


def test_a_killed_runner_actor_is_replaced_and_every_rollout_finishes() -> None:
    config = RolloutConfig(max_attempts=3, retry_condition=["unresponsive"], unresponsive_seconds=20.0)
    algorithm = EnqueueAllAlgorithm(config=config, timeout=240)
    strategy = agl.RayExecutionStrategy(
        n_runners=2,
        ray_init_kwargs={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False},
    )
    runner = agl.LitAgentRunner(heartbeat_interval=0.5, interval_jitter=0.0, poll_interval=0.1)
    trainer = agl.Trainer(algorithm=algorithm, strategy=strategy, runner=runner, progress="off")
    errors: list[BaseException] = []

    def fit() -> None:
        try:
            trainer.fit(PidAgent(), [{"sleep": 0.3} for _ in range(16)])
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    import asyncio

    victim: Any = None
    deadline = time.monotonic() + 180
    while victim is None and time.monotonic() < deadline:
        for worker in asyncio.run(trainer.store.query_workers()):
            pid = (worker.heartbeat_stats or {}).get("pid")
            if worker.status == "busy" and pid not in (None, os.getpid()):
                victim = pid
                break
        time.sleep(0.05)
    assert victim is not None, "no runner actor started working"
    os.kill(victim, signal.SIGKILL)
    thread.join(240)
    assert not thread.is_alive() and not errors, errors
    assert len(algorithm.finished) == 16 and all(r.status == "succeeded" for r in algorithm.finished)
    retried = [
        attempts
        for rollout in algorithm.finished
        if len(attempts := asyncio.run(trainer.store.query_attempts(rollout.rollout_id))) > 1
    ]
    assert retried and retried[0][0].status == "unresponsive"
    assert not ray.is_initialized()


def test_an_actor_that_cannot_be_placed_stops_the_run_naming_it_and_what_it_asked_for() -> None:
    strategy = agl.RayExecutionStrategy(
        n_runners=1,
        actor_options={"num_cpus": 0.5, "resources": {"gpu_box": 1}},  # no node has a "gpu_box"
        start_timeout=3.0,
        ray_init_kwargs={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False},
    )
    trainer = agl.Trainer(algorithm=EnqueueAllAlgorithm(timeout=120), strategy=strategy, progress="off")
    with pytest.raises(RuntimeError) as info:
        trainer.fit(PidAgent(), [{"sleep": 0.1}])
    message = str(info.value)
    assert message.startswith("runner actor 0 could not be placed: no runner actor started for 3 s"), message
    assert "asks for {'num_cpus': 0.5, 'gpu_box': 1}" in message and "{'CPU': 2.0} free of {'CPU': 2.0}" in message
    assert not ray.is_initialized()


class FakeRay:
    class util:
        @staticmethod
        def get_node_ip_address() -> str:
            return "10.1.2.3"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"server_host": "0.0.0.0"}, "http://10.1.2.3:4747"),  # the driver node's address, not loopback
        ({"server_host": "::"}, "http://10.1.2.3:4747"),
        ({"server_host": "127.0.0.1"}, "http://127.0.0.1:4747"),  # a single-node run keeps loopback
        ({"server_host": "0.0.0.0", "advertise_host": "trainer.example"}, "http://trainer.example:4747"),
        ({"server_host": "0.0.0.0", "advertise_host": "fd00::1"}, "http://[fd00::1]:4747"),
    ],
)
def test_actors_are_given_an_address_other_nodes_can_reach(options: dict[str, str], expected: str) -> None:
    strategy = agl.RayExecutionStrategy(**options)  # type: ignore[arg-type]
    assert strategy._actor_url(FakeRay(), 4747) == expected  # pyright: ignore[reportPrivateUsage]


class PartlyPlacingRay:
    """Ray as the launcher sees it: actors 0-3 start one after the other, actor 4 never gets a place."""

    class exceptions:
        RayActorError = RuntimeError

    def __init__(self) -> None:
        self.launched = 0
        self.started_at = time.monotonic()

    def remote(self, cls: Any) -> Any:
        fake = self

        class Handle:
            def __init__(self, index: int) -> None:
                self.where = type("M", (), {"remote": staticmethod(lambda: ("where", index))})()
                self.run = type("M", (), {"remote": staticmethod(lambda *args: ("run", index))})()

        class Options:
            def options(self, **options: Any) -> Any:
                return self

            def remote(self) -> Any:
                fake.launched += 1
                return Handle(fake.launched - 1)

        return Options()

    def wait(self, refs: list[Any], num_returns: int = 1, timeout: float = 0) -> tuple[list[Any], list[Any]]:
        elapsed = time.monotonic() - self.started_at
        ready = [ref for ref in refs if ref[0] == "where" and ref[1] < 4 and elapsed > 0.3 * (ref[1] + 1)]
        return ready, [ref for ref in refs if ref not in ready]

    def get(self, ref: Any) -> Any:
        return ("node-a", 100 + ref[1])

    def available_resources(self) -> dict[str, float]:
        return {"CPU": 0.0}

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}


def test_slowly_starting_actors_are_waited_for_and_the_one_never_placed_is_named() -> None:
    from agentlightning.execution.ray import ActorLauncher

    launcher = ActorLauncher(PartlyPlacingRay(), b"", {"num_cpus": 0.5}, start_timeout=0.5)
    handles = [launcher.launch(worker_id) for worker_id in range(5)]
    deadline = time.monotonic() + 10
    ended = None
    while ended is None and time.monotonic() < deadline:
        exits = [launcher.exit_of(handle) for handle in handles]
        assert all(item is None for item in exits[:4])  # starting one after the other (0.3 s each) is progress
        ended = exits[4]
        time.sleep(0.05)
    assert ended is not None and ended.fatal and ended.message is not None
    assert ended.message.startswith("runner actor 4 could not be placed"), ended.message
    assert "4 runner actor(s) running" in ended.message
