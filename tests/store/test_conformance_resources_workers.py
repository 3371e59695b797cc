"""Store contract: versioned resources, workers and statistics (every backend)."""

from __future__ import annotations

import asyncio

import pytest

from agentlightning.store import InvalidArgumentError, LightningStore
from agentlightning.store.errors import InvalidArgumentTypeError
from agentlightning.types import LLM, PromptTemplate, ProxyLLM

LLM_RESOURCE = LLM(endpoint="http://127.0.0.1:8000/v1", model="smol", sampling_parameters={"temperature": 0.7})
PROMPT = PromptTemplate(template="You are {role}.", engine="f-string")


async def test_latest_resources_is_none_before_any_resources(store: LightningStore) -> None:
    assert await store.get_latest_resources() is None


async def test_add_resources_generates_an_id_and_becomes_latest(store: LightningStore) -> None:
    update = await store.add_resources({"llm": LLM_RESOURCE, "prompt": PROMPT})
    assert update.resources_id.startswith("rs-") and len(update.resources_id) == 15
    assert isinstance(update.resources["llm"], LLM)
    assert isinstance(update.resources["prompt"], PromptTemplate)
    latest = await store.get_latest_resources()
    by_id = await store.get_resources_by_id(update.resources_id)
    assert latest is not None and latest.resources_id == update.resources_id
    assert by_id is not None and by_id.resources == {"llm": LLM_RESOURCE, "prompt": PROMPT}


async def test_add_resources_twice_gives_distinct_snapshots(store: LightningStore) -> None:
    first = await store.add_resources({"prompt": PROMPT})
    second = await store.add_resources({"llm": LLM_RESOURCE})
    assert first.resources_id != second.resources_id
    assert await store.get_resources_by_id(first.resources_id) is not None
    latest = await store.get_latest_resources()
    assert latest is not None and latest.resources_id == second.resources_id


async def test_update_resources_creates_or_replaces_and_moves_latest(store: LightningStore) -> None:
    await store.update_resources("v1", {"prompt": PROMPT})
    latest = await store.get_latest_resources()
    assert latest is not None and latest.resources_id == "v1"
    await store.update_resources("v2", {"llm": LLM_RESOURCE})
    latest = await store.get_latest_resources()
    v1 = await store.get_resources_by_id("v1")
    assert latest is not None and latest.resources_id == "v2"
    assert v1 is not None and v1.resources == {"prompt": PROMPT}
    assert await store.get_resources_by_id("v3") is None


async def test_update_resources_of_an_older_id_makes_it_latest_again(store: LightningStore) -> None:
    await store.update_resources("v1", {"prompt": PROMPT})
    await store.update_resources("v2", {"prompt": PROMPT})
    await store.update_resources("v1", {"llm": LLM_RESOURCE})
    latest = await store.get_latest_resources()
    assert latest is not None and latest.resources_id == "v1" and latest.resources == {"llm": LLM_RESOURCE}


async def test_resources_keep_their_subclass_and_fields(store: LightningStore) -> None:
    proxy = ProxyLLM(endpoint="http://127.0.0.1:9/v1", model="m", api_key="secret")
    update = await store.update_resources("proxy", {"llm": proxy})
    stored = await store.get_resources_by_id(update.resources_id)
    assert stored is not None
    assert type(stored.resources["llm"]) is ProxyLLM
    assert stored.resources["llm"].model_dump() == proxy.model_dump()


async def test_resources_versions_and_timestamps(store: LightningStore) -> None:
    added = await store.add_resources({"prompt": PROMPT})
    assert added.version == 1 and added.update_time == added.create_time
    first = await store.update_resources("snap", {"prompt": PROMPT})
    assert first.version == 1
    versions = []
    for _ in range(4):
        await asyncio.sleep(0.002)
        versions.append(await store.update_resources("snap", {"llm": LLM_RESOURCE}))
    assert [v.version for v in versions] == [2, 3, 4, 5]
    assert all(v.create_time == first.create_time for v in versions)
    assert versions[-1].update_time > first.update_time
    other = await store.update_resources("other", {"prompt": PROMPT})
    assert other.version == 1
    stored = await store.get_resources_by_id("snap")
    assert stored is not None and (stored.version, stored.create_time) == (5, first.create_time)


async def test_add_resources_accepts_plain_dicts(store: LightningStore) -> None:
    update = await store.add_resources(
        {"llm": {"resource_type": "llm", "endpoint": "http://127.0.0.1:1", "model": "m"}}  # type: ignore[dict-item]
    )
    assert isinstance(update.resources["llm"], LLM)


async def test_add_resources_rejects_an_unknown_resource_type(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentError, match="resources"):
        await store.add_resources({"x": {"resource_type": "spaceship"}})  # type: ignore[dict-item]
    assert await store.get_latest_resources() is None


async def test_query_resources_lists_history_with_filters_sort_and_pages(store: LightningStore) -> None:
    for name in ("alpha-1", "beta-1", "alpha-2"):
        await store.update_resources(name, {"prompt": PROMPT})
    assert [r.resources_id for r in await store.query_resources()] == ["alpha-1", "beta-1", "alpha-2"]
    assert [r.resources_id for r in await store.query_resources(resources_id="beta-1")] == ["beta-1"]
    alphas = await store.query_resources(resources_id_contains="alpha", sort_by="resources_id", sort_order="desc")
    assert [r.resources_id for r in alphas] == ["alpha-2", "alpha-1"]
    page = await store.query_resources(sort_by="resources_id", limit=1, offset=1)
    assert [r.resources_id for r in page] == ["alpha-2"]
    assert page.total == 3  # type: ignore[attr-defined]
    assert list(await store.query_resources(offset=5)) == []
    combined = await store.query_resources(resources_id="alpha-1", resources_id_contains="alpha")
    assert [r.resources_id for r in combined] == ["alpha-1"]


async def test_update_worker_creates_a_worker_with_a_heartbeat(store: LightningStore) -> None:
    worker = await store.update_worker("worker-1", {"cpu": 0.5})
    assert worker.worker_id == "worker-1"
    assert worker.status == "unknown"
    assert worker.heartbeat_stats == {"cpu": 0.5}
    assert isinstance(worker.last_heartbeat_time, float)


async def test_update_worker_advances_the_heartbeat_and_keeps_stats(store: LightningStore) -> None:
    first = await store.update_worker("worker-1", {"cpu": 0.5})
    await asyncio.sleep(0.002)
    second = await store.update_worker("worker-1")
    assert second.heartbeat_stats == {"cpu": 0.5}
    assert second.last_heartbeat_time is not None and first.last_heartbeat_time is not None
    assert second.last_heartbeat_time > first.last_heartbeat_time


async def test_update_worker_rejects_none_stats(store: LightningStore) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="heartbeat_stats"):
        await store.update_worker("worker-1", None)  # type: ignore[arg-type]
    assert await store.get_worker_by_id("worker-1") is None


async def test_get_worker_by_id_returns_none_for_an_unknown_worker(store: LightningStore) -> None:
    assert await store.get_worker_by_id("nobody") is None


async def test_dequeue_with_a_worker_marks_it_busy(store: LightningStore) -> None:
    queued = await store.enqueue_rollout("task")
    claimed = await store.dequeue_rollout(worker_id="worker-1")
    assert claimed is not None and claimed.attempt.worker_id == "worker-1"
    worker = await store.get_worker_by_id("worker-1")
    assert worker is not None and worker.status == "busy"
    assert worker.current_rollout_id == queued.rollout_id
    assert worker.current_attempt_id == claimed.attempt.attempt_id
    assert worker.last_dequeue_time is not None and worker.last_busy_time is not None


async def test_worker_becomes_idle_when_its_attempt_ends(store: LightningStore) -> None:
    await store.enqueue_rollout("task")
    await store.dequeue_rollout(worker_id="worker-1")
    await store.update_worker("worker-1", {"gpu": 1})
    await store.update_attempt((await store.query_rollouts())[0].rollout_id, "latest", status="succeeded")
    worker = await store.get_worker_by_id("worker-1")
    assert worker is not None and worker.status == "idle"
    assert worker.current_rollout_id is None and worker.current_attempt_id is None
    assert worker.last_idle_time is not None
    assert worker.heartbeat_stats == {"gpu": 1} and worker.last_heartbeat_time is not None


async def test_update_attempt_with_a_worker_marks_it_busy(store: LightningStore) -> None:
    started = await store.start_rollout("task")
    await store.update_attempt(started.rollout_id, "latest", worker_id="worker-2")
    worker = await store.get_worker_by_id("worker-2")
    assert worker is not None and worker.status == "busy"
    assert worker.current_attempt_id == started.attempt.attempt_id


async def test_start_rollout_and_start_attempt_assign_the_worker(store: LightningStore) -> None:
    started = await store.start_rollout("task", worker_id="worker-a")
    assert started.attempt.worker_id == "worker-a"
    retried = await store.start_attempt(started.rollout_id, worker_id="worker-b")
    assert retried.attempt.worker_id == "worker-b"
    worker_a = await store.get_worker_by_id("worker-a")
    worker_b = await store.get_worker_by_id("worker-b")
    assert worker_a is not None and worker_a.current_attempt_id == started.attempt.attempt_id
    assert worker_b is not None and worker_b.status == "busy"
    assert worker_b.current_attempt_id == retried.attempt.attempt_id


async def test_empty_dequeue_marks_an_idle_worker_and_stamps_the_time(store: LightningStore) -> None:
    assert await store.dequeue_rollout(worker_id="worker-1") is None
    worker = await store.get_worker_by_id("worker-1")
    assert worker is not None and worker.status == "idle" and worker.last_dequeue_time is not None


async def test_query_workers_filters_sorts_and_pages(store: LightningStore) -> None:
    for worker_id in ("w-b", "w-a", "x-c"):
        await store.update_worker(worker_id)
    await store.enqueue_rollout("task")
    await store.dequeue_rollout(worker_id="w-a")
    busy = await store.query_workers(status_in=["busy"])
    assert [w.worker_id for w in busy] == ["w-a"]
    named = await store.query_workers(worker_id_contains="w-", sort_by="worker_id", sort_order="desc")
    assert [w.worker_id for w in named] == ["w-b", "w-a"]
    either = await store.query_workers(status_in=["busy"], worker_id_contains="x-", filter_logic="or")
    assert {w.worker_id for w in either} == {"w-a", "x-c"}
    both = await store.query_workers(status_in=["busy"], worker_id_contains="x-")
    assert list(both) == []
    page = await store.query_workers(sort_by="worker_id", limit=2, offset=1)
    assert [w.worker_id for w in page] == ["w-b", "x-c"] and page.total == 3  # type: ignore[attr-defined]


async def test_statistics_count_every_entity(store: LightningStore) -> None:
    before = await store.statistics()
    started = await store.start_rollout("task")
    from .helpers import make_span

    await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, 1))
    await store.add_resources({"prompt": PROMPT})
    await store.update_worker("worker-1")
    await asyncio.sleep(0.01)
    after = await store.statistics()
    assert after.get("name")
    for key in ("total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers"):
        assert after[key] == before.get(key, 0) + 1, key  # type: ignore[literal-required]
    assert after["uptime"] > before["uptime"]


async def test_capabilities_declare_concurrency_guarantees(store: LightningStore) -> None:
    capabilities = store.capabilities
    assert capabilities.get("async_safe") is True
    assert capabilities.get("thread_safe") is True


async def test_changing_the_input_after_add_resources_does_not_change_the_snapshot(store: LightningStore) -> None:
    llm = LLM(endpoint="http://127.0.0.1:8000/v1", model="smol", sampling_parameters={"temperature": 0.7})
    given = {"llm": llm}
    update = await store.add_resources(given)
    llm.model = "changed"
    llm.sampling_parameters["temperature"] = 2.0
    given["other"] = PROMPT
    stored = await store.get_resources_by_id(update.resources_id)
    assert stored is not None and stored.resources == {"llm": LLM_RESOURCE}


async def test_changing_the_input_after_update_resources_does_not_change_the_snapshot(store: LightningStore) -> None:
    update = await store.add_resources({"prompt": PROMPT})
    llm = LLM(endpoint="http://127.0.0.1:8000/v1", model="smol", sampling_parameters={"temperature": 0.7})
    await store.update_resources(update.resources_id, {"llm": llm})
    llm.model = "changed"
    llm.sampling_parameters["temperature"] = 2.0
    stored = await store.get_resources_by_id(update.resources_id)
    assert stored is not None and stored.resources == {"llm": LLM_RESOURCE}


@pytest.mark.parametrize("path", ["add", "update", "by_id", "latest", "query"])
async def test_changing_a_returned_snapshot_does_not_change_the_stored_one(store: LightningStore, path: str) -> None:
    added = await store.add_resources({"llm": LLM_RESOURCE.model_copy(deep=True)})
    if path == "add":
        returned = added
    elif path == "update":
        returned = await store.update_resources(added.resources_id, {"llm": LLM_RESOURCE.model_copy(deep=True)})
    elif path == "by_id":
        returned = await store.get_resources_by_id(added.resources_id)
    elif path == "latest":
        returned = await store.get_latest_resources()
    else:
        returned = (await store.query_resources())[0]
    assert returned is not None
    llm = returned.resources["llm"]
    assert isinstance(llm, LLM)
    llm.model = "changed"
    llm.sampling_parameters["temperature"] = 2.0
    returned.resources["extra"] = PROMPT
    for stored in (await store.get_resources_by_id(added.resources_id), await store.get_latest_resources()):
        assert stored is not None and stored.resources == {"llm": LLM_RESOURCE}
