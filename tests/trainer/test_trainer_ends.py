"""How `fit` and `dev` end: a Ctrl-C is raised after clean-up, an unreachable store fails fast, runners that cannot go
on stop even a synchronous algorithm."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import agentlightning as agl
from agentlightning.runner.errors import StoreUnreachableError

from ..execution.helpers import BlockingSyncAlgorithm, EnqueueAllAlgorithm, refuse_to_load
from ..runner.agents import ScriptedAgent


class InterruptedAfterTheRollouts(EnqueueAllAlgorithm, agl.FastAlgorithm):
    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        await super().run(train_dataset, val_dataset)
        raise KeyboardInterrupt  # where a Ctrl-C lands in a real run


@pytest.mark.parametrize("method", ["fit", "dev"])
def test_an_interrupted_run_raises_keyboard_interrupt_after_clean_up(method: str) -> None:
    trainer = agl.Trainer(algorithm=InterruptedAfterTheRollouts(), strategy="shm", n_runners=2, progress="off")
    with pytest.raises(KeyboardInterrupt):
        getattr(trainer, method)(ScriptedAgent(), [{"reward": 1.0}, {"raise": "bad"}])
    assert trainer.summary is not None
    snapshot = trainer.summary.snapshot
    assert (snapshot.succeeded, snapshot.failed, snapshot.running) == (1, 1, 0)


def test_an_unreachable_store_url_fails_before_anything_starts_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = agl.Trainer(algorithm=EnqueueAllAlgorithm(), store="http://127.0.0.1:9", n_runners=2, progress="off")

    def never(*args: Any) -> None:
        raise AssertionError("the strategy started against a store that is not there")

    monkeypatch.setattr(trainer.strategy, "execute", never)
    started = time.monotonic()
    with pytest.raises(StoreUnreachableError) as info:
        trainer.fit(ScriptedAgent(), [{}])
    message = str(info.value)
    assert message.startswith("Cannot reach the store at http://127.0.0.1:9: ") and "\n" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert time.monotonic() - started < 20  # the client's own retries, then the one-line error


class UnloadableAgent(ScriptedAgent):
    """An agent whose module a runner process cannot import: it pickles, but fails to load there."""

    def __reduce__(self) -> Any:
        return (refuse_to_load, ())


def test_runners_that_cannot_start_stop_a_synchronous_algorithm() -> None:
    trainer = agl.Trainer(algorithm=BlockingSyncAlgorithm(seconds=60), n_runners=1, progress="off")
    with pytest.raises(RuntimeError, match=r"runner-0 exited with exit code 2 before it started"):
        trainer.fit(UnloadableAgent(), [{}])


def test_the_summary_after_a_run_counts_what_the_store_holds() -> None:
    algorithm = EnqueueAllAlgorithm(timeout=30)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=1, progress="off")
    trainer.fit(ScriptedAgent(), [{"reward": 1.0}, {"raise": "bad"}, {"reward": 0.0}])
    assert trainer.summary is not None

    async def counts() -> list[str]:
        return [rollout.status for rollout in await trainer.store.query_rollouts()]

    statuses = asyncio.run(counts())
    snapshot = trainer.summary.snapshot
    assert (snapshot.succeeded, snapshot.failed, snapshot.running) == (
        statuses.count("succeeded"),
        statuses.count("failed"),
        0,
    )
