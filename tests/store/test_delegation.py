"""The wrappers' store methods are generated from the contract and pass on only what the caller gave."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from agentlightning.store import InMemoryLightningStore, LightningStore
from agentlightning.store.base import UNSET
from agentlightning.store.delegating import DelegatingStore
from agentlightning.store.forwarding import call_store, given_arguments
from agentlightning.store.threading import LightningStoreThreaded
from agentlightning.types import AttemptedRollout

ROOT = Path(__file__).resolve().parents[2]


def _contract_coroutines() -> list[str]:
    return [
        name
        for name, member in vars(LightningStore).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member) and name != "close"
    ]


def test_the_generated_file_is_current() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/generate_store_delegation.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", _contract_coroutines())
def test_every_contract_coroutine_is_generated_with_the_contract_signature(name: str) -> None:
    generated = vars(DelegatingStore)[name]
    assert inspect.signature(generated) == inspect.signature(getattr(LightningStore, name))


def test_given_arguments_drop_values_equal_to_the_contract_default() -> None:
    arguments = {"rollout_id": "ro-1", "sort_by": "sequence_id", "sort_order": "desc", "limit": -1, "offset": 0}
    assert given_arguments("query_attempts", arguments) == {"rollout_id": "ro-1", "sort_order": "desc"}


def test_given_arguments_keep_a_falsy_value_that_is_not_the_default() -> None:
    arguments = {"rollout_id": "ro-1", "sort_by": None, "sort_order": "asc", "limit": 0, "offset": 0}
    assert given_arguments("query_attempts", arguments) == {"rollout_id": "ro-1", "sort_by": None, "limit": 0}


def test_unset_arguments_are_not_passed_on() -> None:
    arguments = {"worker_id": "w", "heartbeat_stats": UNSET}
    assert given_arguments("update_worker", arguments) == {"worker_id": "w"}


class _StoreWithOldSignatures(InMemoryLightningStore):
    """A store written against 0.2: no `worker_id` parameters."""

    async def start_attempt(self, rollout_id: str) -> AttemptedRollout:  # type: ignore[override]
        return await super().start_attempt(rollout_id)

    async def dequeue_rollout(self) -> Optional[AttemptedRollout]:  # type: ignore[override]
        return await super().dequeue_rollout()


async def test_a_store_with_0_2_signatures_works_behind_the_threaded_wrapper() -> None:
    wrapped = LightningStoreThreaded(_StoreWithOldSignatures())
    rollout = await wrapped.enqueue_rollout({"q": 1})
    claimed = await wrapped.dequeue_rollout()
    assert claimed is not None and claimed.rollout_id == rollout.rollout_id
    retried = await wrapped.start_attempt(rollout.rollout_id)
    assert retried.attempt.sequence_id == 2


async def test_required_arguments_travel_positionally() -> None:
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class Recording(LightningStore):
        async def get_rollout_by_id(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
            seen.append((args, kwargs))

    await call_store(Recording(), "get_rollout_by_id", {"rollout_id": "ro-1"})
    assert seen == [(("ro-1",), {})]


def test_an_unknown_operation_is_named_in_the_error() -> None:
    with pytest.raises(AttributeError, match="no_such_operation"):
        given_arguments("no_such_operation", {})
