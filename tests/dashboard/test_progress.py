"""The whole-run aggregates the store server computes for the Overview (`agentlightning/dashboard/progress.py`).

The scenarios run on the package's loop thread: Playwright's sync API keeps an event loop running in the main
thread once a browser test of this package has started."""

from __future__ import annotations

from typing import Any, Optional

import pytest

import agentlightning as agl
from agentlightning.dashboard.progress import FinishedRollout, RunProgress, bucket_width, grpo_step, summarize
from agentlightning.store import InMemoryLightningStore, LightningStore

from .conftest import LoopThread


async def finish(
    store: LightningStore, count: int, *, mode: str = "train", reward: Any = 1.0, status: str = "succeeded"
) -> list[str]:
    """`count` rollouts finished as a runner finishes them (final_reward in the attempt's metadata)."""
    ids = []
    for _ in range(count):
        rollout = await store.start_rollout(input={}, mode=mode)  # type: ignore[arg-type]
        metadata = {} if reward == "none" else {"final_reward": reward}
        await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status=status, metadata=metadata)
        ids.append(rollout.rollout_id)
    return ids


class CountingStore(InMemoryLightningStore):
    """Counts the rollout pages the aggregation reads."""

    pages = 0

    async def query_rollouts(self, **kwargs: Any) -> Any:  # type: ignore[override]
        self.pages += 1
        return await super().query_rollouts(**kwargs)


def test_a_run_longer_than_the_recent_window_is_counted_whole(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        await finish(store, 1_300, reward=1.0)
        await finish(store, 100, mode="val", reward=0.0, status="failed")
        summary = await RunProgress(store).snapshot(buckets=60)
        assert summary["complete"] and summary["finished"] == 1_400
        totals = summary["totals"]
        assert (totals["count"], totals["rewarded"], totals["succeeded"], totals["failed"]) == (
            1_400,
            1_400,
            1_300,
            100,
        )
        assert totals["mean_reward"] == pytest.approx(1_300 / 1_400)
        assert sum(bucket["count"] for bucket in summary["buckets"]) == 1_400
        assert summary["modes"] == ["train", "val"]
        [train, val] = summary["versions"]
        assert (train["mode"], train["count"], train["mean_reward"]) == ("train", 1_300, 1.0)
        assert (val["mode"], val["count"], val["positive_share"]) == ("val", 100, 0.0)

    loop_thread.run(scenario())


def test_a_long_run_is_read_in_bounded_steps(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = CountingStore()
        await finish(store, 250)
        progress = RunProgress(store, page_size=50, max_pages=2)
        first = await progress.snapshot()
        assert (first["complete"], first["totals"]["count"], first["finished"]) == (False, 100, 250)
        assert store.pages == 2
        while not (await progress.snapshot())["complete"]:
            pass
        assert (await progress.snapshot())["totals"]["count"] == 250

    loop_thread.run(scenario())


def test_later_requests_read_only_the_newest_rollouts(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = CountingStore()
        await finish(store, 300)
        progress = RunProgress(store, page_size=50)
        await progress.snapshot()
        await finish(store, 3)
        store.pages = 0
        summary = await progress.snapshot()
        assert summary["totals"]["count"] == 303
        assert store.pages <= 7  # the newest pages within the margin of the newest end time, not the whole run again

    loop_thread.run(scenario())


def test_a_rollout_that_left_the_finished_ones_is_no_longer_counted(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        ids = await finish(store, 5)
        progress = RunProgress(store)
        assert (await progress.snapshot())["totals"]["count"] == 5
        await store.update_rollout(ids[0], status="requeuing")
        assert (await progress.snapshot())["totals"]["count"] == 4

    loop_thread.run(scenario())


def test_a_reward_no_runner_recorded_is_read_from_the_reward_spans(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        [rollout_id] = await finish(store, 1, reward="none")
        rollout = await store.get_rollout_by_id(rollout_id)
        attempt_id = rollout.attempt.attempt_id  # type: ignore[union-attr]
        await store.add_otel_span(rollout_id, attempt_id, _reward_span(0.25))
        summary = await RunProgress(store).snapshot()
        assert summary["totals"]["mean_reward"] == 0.25 and summary["pending_rewards"] == 0

    loop_thread.run(scenario())


def test_bookkeeping_rollouts_are_left_out(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        await finish(store, 2)
        record = await store.start_rollout(input={}, metadata={"agentlightning.bookkeeping": "apo_checkpoint"})
        await store.update_attempt(record.rollout_id, record.attempt.attempt_id, status="succeeded")
        summary = await RunProgress(store).snapshot()
        assert (summary["totals"]["count"], summary["finished"]) == (2, 2)

    loop_thread.run(scenario())


def test_a_grpo_runs_rewards_are_grouped_by_step_with_evaluations_at_their_weights_step(
    loop_thread: LoopThread,
) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        first = await store.add_resources({"p": agl.PromptTemplate(template="a", engine="f-string")})
        second = await store.add_resources({"p": agl.PromptTemplate(template="b", engine="f-string")})
        other = await store.add_resources({"p": agl.PromptTemplate(template="c", engine="f-string")})
        runs = [  # (mode, resources, metadata, reward): what GRPO enqueues for two steps and two evaluations
            ("val", first, {"grpo": {"evaluation": "before", "version": 1}}, 0.0),
            ("train", first, {"grpo": {"step": 1, "version": 1, "group": 0}}, 0.0),
            ("train", first, {"grpo": {"step": 1, "version": 1, "group": 0}}, 1.0),
            ("train", second, {"grpo": {"step": 2, "version": 2, "group": 0}}, 1.0),
            ("val", second, {"grpo": {"evaluation": "after", "version": 2}}, 1.0),
            ("train", other, {}, 0.5),  # not GRPO's, with resources no GRPO rollout used: no step
        ]
        for mode, resources, metadata, reward in runs:
            rollout = await store.start_rollout(
                input={},
                mode=mode,  # type: ignore[arg-type]
                resources_id=resources.resources_id,
                metadata=metadata,
            )
            attempt = rollout.attempt.attempt_id
            await store.update_attempt(
                rollout.rollout_id, attempt, status="succeeded", metadata={"final_reward": reward}
            )
        summary = await RunProgress(store).snapshot()
        steps = [(group["step"], group["mode"], group["count"], group["mean_reward"]) for group in summary["steps"]]
        assert steps == [(1, "train", 2, 0.5), (1, "val", 1, 0.0), (2, "train", 1, 1.0), (2, "val", 1, 1.0)]

    loop_thread.run(scenario())


def test_a_run_without_grpo_has_no_steps() -> None:
    record = FinishedRollout("ro-1", 1.0, "train", "succeeded", None, 1.0, "at-1")
    assert summarize([record])["steps"] == [] and summarize([])["steps"] == []


@pytest.mark.parametrize(
    ("metadata", "step"),
    [({"grpo": {"step": 3}}, 3), ({"grpo": {"step": True}}, None), ({"grpo": "x"}, None), (None, None), ({}, None)],
)
def test_the_grpo_step_is_read_from_the_rollouts_metadata(metadata: Any, step: Optional[int]) -> None:
    assert grpo_step(metadata) == step


def test_buckets_are_round_widths_that_cover_the_run() -> None:
    assert bucket_width(0, 60) == 1
    assert bucket_width(3_600, 60) == 60
    assert bucket_width(3_601, 60) == 120


def _reward_span(value: float) -> Any:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test")
    span = tracer.start_span("agentlightning.reward", attributes={"reward": value})
    span.end()
    return span


def _served(store: LightningStore, api_key: Optional[str] = None) -> Any:
    from starlette.testclient import TestClient

    from agentlightning.store.http.server.app import ServerSettings, create_app

    return TestClient(create_app(store, ServerSettings(api_key=api_key)))


def test_the_store_server_answers_with_the_aggregates_and_its_clock(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        store = InMemoryLightningStore()
        await finish(store, 3)
        client = _served(store)
        answer = client.get("/v1/agl/dashboard/progress?buckets=10")
        assert answer.status_code == 200 and answer.json()["totals"]["count"] == 3
        assert abs(float(answer.headers["x-agl-server-time"]) - __import__("time").time()) < 60
        refused = client.get("/v1/agl/dashboard/progress?buckets=many")
        assert refused.status_code == 400 and "buckets must be a whole number from 1 to 500" in refused.json()["detail"]

    loop_thread.run(scenario())


def test_the_aggregates_need_the_api_key_like_the_rest_of_the_api(loop_thread: LoopThread) -> None:
    async def scenario() -> None:
        client = _served(InMemoryLightningStore(), api_key="secret")
        assert client.get("/v1/agl/dashboard/progress").status_code == 401
        assert client.get("/v1/agl/dashboard/progress", headers={"Authorization": "Bearer secret"}).status_code == 200
        assert client.get("/").status_code == 200  # the page itself stays open: it asks for the key

    loop_thread.run(scenario())


def test_the_relay_passes_the_store_servers_clock_on(loop_thread: LoopThread) -> None:
    from starlette.testclient import TestClient

    from agentlightning.dashboard.proxy import create_proxy_app
    from agentlightning.store.client_server import LightningStoreServer

    server = LightningStoreServer(agl.InMemoryLightningStore(), port=0)
    loop_thread.run(server.start())
    try:
        with TestClient(create_proxy_app(server.endpoint)) as client:
            answer = client.get("/v1/agl/rollouts?limit=0")
        assert answer.status_code == 200 and "x-agl-server-time" in answer.headers
    finally:
        loop_thread.run(server.stop())
