"""The algorithm's patience with its store: outages are waited out for a bounded time, other errors are not, and the
trainer hands every algorithm its store that way."""

from __future__ import annotations

import logging
import pickle
from typing import Any

import pytest

from agentlightning.algorithm.patience import PatientStore, call_with_patience, unwrap_store
from agentlightning.store import InMemoryLightningStore, InvalidArgumentError
from agentlightning.store.http.errors import StoreConnectionError


class Flaky:
    """An operation that fails with `error` `failures` times, then returns "ok"."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


async def test_an_outage_is_waited_out_and_the_wait_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    operation = Flaky(2, StoreConnectionError("Cannot reach the LightningStore server"))
    with caplog.at_level(logging.WARNING, logger="agentlightning.algorithm.patience"):
        result = await call_with_patience(operation, what="enqueue_rollout", where="http://store", patience_seconds=30)
    assert result == "ok" and operation.calls == 3
    assert "waiting up to 30 s for it (store_patience)" in caplog.text
    assert "reachable again" in caplog.text


async def test_an_error_that_is_not_an_outage_is_raised_at_once() -> None:
    operation = Flaky(5, InvalidArgumentError("bad sort_by"))
    with pytest.raises(InvalidArgumentError):
        await call_with_patience(operation, what="query_rollouts", where="http://store", patience_seconds=30)
    assert operation.calls == 1


async def test_an_outage_longer_than_the_patience_fails_naming_the_option() -> None:
    now = [0.0]

    class Outage:
        calls = 0

        async def __call__(self) -> None:
            self.calls += 1
            now[0] += 4.0  # each try takes 4 s (the client's own retries)
            raise StoreConnectionError("Cannot reach the LightningStore server")

    operation = Outage()
    with pytest.raises(StoreConnectionError, match=r"Trainer\(store_patience=...\)") as caught:
        await call_with_patience(
            operation, what="enqueue_rollout", where="http://store", patience_seconds=10, clock=lambda: now[0]
        )
    assert operation.calls == 3 and "waited 12 s" in str(caught.value)


async def test_a_patient_store_forwards_calls_and_attributes() -> None:
    inner = InMemoryLightningStore()
    store = PatientStore(inner, patience_seconds=5)
    rollout = await store.enqueue_rollout({"x": 1}, metadata={"marker": "m"})
    assert (await inner.get_rollout_by_id(rollout.rollout_id)) is not None
    assert store.is_remote is inner.is_remote and store.capabilities == inner.capabilities
    assert unwrap_store(store) is inner
    copy: Any = pickle.loads(pickle.dumps(PatientStore(InMemoryLightningStore(), patience_seconds=7)))
    assert copy.patience_seconds == 7


def test_a_negative_patience_is_rejected() -> None:
    with pytest.raises(ValueError, match="store_patience"):
        PatientStore(InMemoryLightningStore(), patience_seconds=-1)


def test_the_trainer_rejects_a_negative_store_patience() -> None:
    import agentlightning as agl

    with pytest.raises(ValueError, match="store_patience"):
        agl.Trainer(store_patience=-5, progress="off")
