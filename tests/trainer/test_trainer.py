"""Trainer construction (components from every kind of spec, store URLs) and runs (datasets, dev, summary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.execution import ClientServerExecutionStrategy, SharedMemoryExecutionStrategy
from agentlightning.tracer.otel import OtelTracer

from ..execution.helpers import EnqueueAllAlgorithm
from ..runner.agents import ScriptedAgent


class FastEnqueueAll(EnqueueAllAlgorithm, agl.FastAlgorithm):
    pass


def test_defaults() -> None:
    trainer = agl.Trainer()
    assert isinstance(trainer.strategy, ClientServerExecutionStrategy) and trainer.strategy.n_runners == 1
    assert isinstance(trainer.tracer, OtelTracer)
    assert isinstance(trainer.adapter, agl.TracerTraceToTriplet)
    assert isinstance(trainer.runner, agl.LitAgentRunner) and trainer.runner.tracer is trainer.tracer
    assert isinstance(trainer.store, agl.InMemoryLightningStore)
    assert trainer.algorithm is None and trainer.hooks == ()


def test_components_from_classes_strings_and_dicts() -> None:
    trainer = agl.Trainer(
        tracer=agl.DummyTracer,
        adapter="agentlightning.adapter.messages.TraceToMessages",
        runner={"type": "agentlightning.runner.LitAgentRunner", "poll_interval": 0.5},
        strategy={"type": "shm", "main_thread": "algorithm"},
        n_runners=3,
        max_rollouts=7,
    )
    assert isinstance(trainer.tracer, agl.DummyTracer)
    assert isinstance(trainer.adapter, agl.TraceToMessages)
    runner = trainer.runner
    assert isinstance(runner, agl.LitAgentRunner) and runner.poll_interval == 0.5 and runner.max_rollouts == 7
    assert runner.tracer is trainer.tracer
    assert isinstance(trainer.strategy, SharedMemoryExecutionStrategy) and trainer.strategy.n_runners == 3


def test_adapter_dict_without_type_configures_the_default_adapter() -> None:
    trainer = agl.Trainer(adapter={"agent_match": "solver", "repair_hierarchy": False})
    assert isinstance(trainer.adapter, agl.TracerTraceToTriplet)


def test_a_prebuilt_strategy_keeps_its_runners_and_takes_the_port() -> None:
    strategy = ClientServerExecutionStrategy(n_runners=5)
    trainer = agl.Trainer(strategy=strategy, n_runners=2, port=5999)
    assert trainer.n_runners == 5 and strategy.server_port == 5999
    assert agl.Trainer(strategy="shm", port=5999).strategy.n_runners == 1


def test_the_store_may_be_a_url(tmp_path: Path) -> None:
    trainer = agl.Trainer(store=f"sqlite:///{tmp_path / 'run.db'}")
    assert type(trainer.store).__name__ == "SqliteLightningStore"
    external = agl.Trainer(store="http://127.0.0.1:1")
    assert type(external.store).__name__ == "LightningStoreClient"
    assert isinstance(external.strategy, ClientServerExecutionStrategy) and not external.strategy.managed_store


def test_environment_configures_the_default_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_SERVER_PORT", "6123")
    monkeypatch.setenv("AGL_CURRENT_ROLE", "algorithm")
    monkeypatch.setenv("AGL_MANAGED_STORE", "0")
    strategy = agl.Trainer().strategy
    assert isinstance(strategy, ClientServerExecutionStrategy)
    assert (strategy.server_port, strategy.role, strategy.managed_store) == (6123, "algorithm", False)


def test_deprecated_names_are_accepted() -> None:
    with pytest.warns(DeprecationWarning):
        trainer = agl.Trainer(n_workers=3, max_tasks=4, strategy="shm")
    assert trainer.n_runners == 3 and trainer.max_rollouts == 4 and trainer.n_workers == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"n_runners": 0}, "n_runners"), ({"max_rollouts": -1}, "max_rollouts"), ({"tracer": 3}, "Invalid `tracer`")],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        agl.Trainer(**kwargs)


def test_bad_datasets_and_agents_are_named() -> None:
    trainer = agl.Trainer(strategy="shm", algorithm=EnqueueAllAlgorithm(), progress="off")
    with pytest.raises(TypeError, match="train_dataset must be a sequence"):
        trainer.fit(ScriptedAgent(), 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"agent must be a LitAgent.*@agl\.rollout"):
        trainer.fit(lambda task: 1.0, [1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"v0\.1"):
        trainer.fit(ScriptedAgent(), "http://localhost:9999")  # type: ignore[arg-type]
    cs = agl.Trainer(algorithm=EnqueueAllAlgorithm(), progress="off")
    with pytest.raises(TypeError, match=r"train_dataset\[1\] cannot be sent to the store"):
        cs.fit(ScriptedAgent(), [{}, {"x": object()}])


class IndexedDataset:
    """A datasets.Dataset-like object: only __getitem__ and __len__."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, index: int) -> dict[str, float]:
        if not 0 <= index < self.n:
            raise IndexError(index)
        return {"reward": index / 10}

    def __len__(self) -> int:
        return self.n


def test_fit_with_a_dataset_like_object_reports_counts_and_writes_the_progress_file(tmp_path: Path) -> None:
    algorithm = EnqueueAllAlgorithm()
    progress = tmp_path / "progress.jsonl"
    trainer = agl.Trainer(algorithm=algorithm, strategy="shm", n_runners=2, progress="log", progress_file=str(progress))
    trainer.fit(ScriptedAgent(), IndexedDataset(10))
    assert [r.status for r in algorithm.finished] == ["succeeded"] * 10
    assert trainer.summary is not None
    snapshot = trainer.summary.snapshot
    assert (snapshot.succeeded, snapshot.failed) == (10, 0)
    assert snapshot.reward_mean == pytest.approx(0.45)
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert lines[-1]["final"] is True and lines[-1]["succeeded"] == 10


def test_the_summary_counts_failures_with_their_reasons() -> None:
    trainer = agl.Trainer(algorithm=EnqueueAllAlgorithm(), strategy="shm", progress="off")
    trainer.fit(ScriptedAgent(), [{"raise": "bad task"}, {"raise": "bad task"}, {"reward": 1.0}])
    assert trainer.summary is not None
    assert trainer.summary.snapshot.failed == 2
    assert trainer.summary.failure_reasons == [("RuntimeError: bad task", 2)]
    assert "2x RuntimeError: bad task" in trainer.summary.describe()


def test_dev_requires_a_fast_algorithm() -> None:
    with pytest.raises(TypeError, match="needs a FastAlgorithm"):
        agl.Trainer(algorithm=EnqueueAllAlgorithm()).dev(ScriptedAgent(), [{}])
    algorithm = FastEnqueueAll()
    agl.Trainer(algorithm=algorithm, strategy="shm", progress="off").dev(ScriptedAgent(), [{"reward": 0.5}])
    assert [r.status for r in algorithm.finished] == ["succeeded"]


def test_hooks_given_to_the_trainer_reach_the_runners() -> None:
    seen: list[str] = []

    class Recorder(agl.Hook):
        async def on_rollout_end(self, *, agent: Any, runner: Any, rollout: Any, spans: Any) -> None:
            seen.append(rollout.rollout_id)

    agl.Trainer(algorithm=EnqueueAllAlgorithm(), strategy="shm", hooks=Recorder(), progress="off").fit(
        ScriptedAgent(), [{}, {}]
    )
    assert len(seen) == 2
