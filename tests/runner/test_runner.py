"""LitAgentRunner against a real in-memory store: results, failures, timeouts, hooks, resources, heartbeats."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Optional

import pytest

import agentlightning as agl
from agentlightning.execution.events import ThreadingEvent
from agentlightning.runner import LitAgentRunner
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer import DummyTracer
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import Hook, ResourcesUpdate, Rollout, RolloutConfig, Span

from .agents import AsyncScriptedAgent, ScriptedAgent


class CountingStore(InMemoryLightningStore):
    """A real in-memory store that counts resource reads and attempt heartbeats."""

    def __init__(self) -> None:
        super().__init__()
        self.resource_reads = 0
        self.attempt_beats = 0

    async def update_attempt(self, *args: Any, **kwargs: Any) -> Any:
        attempt = await super().update_attempt(*args, **kwargs)
        if kwargs.get("last_heartbeat_time") is not None:
            self.attempt_beats += 1
        return attempt

    async def get_resources_by_id(self, resources_id: str) -> Optional[ResourcesUpdate]:
        self.resource_reads += 1
        return await super().get_resources_by_id(resources_id)

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        self.resource_reads += 1
        return await super().get_latest_resources()


@pytest.fixture
async def store() -> AsyncIterator[CountingStore]:
    instance = CountingStore()
    yield instance
    await instance.close()


def _runner(**kwargs: Any) -> LitAgentRunner[Any]:
    kwargs.setdefault("tracer", DummyTracer())
    kwargs.setdefault("heartbeat_interval", 0.1)
    kwargs.setdefault("interval_jitter", 0.0)
    kwargs.setdefault("poll_interval", 0.05)
    return LitAgentRunner(**kwargs)


async def _serve(
    runner: LitAgentRunner[Any], agent: Any, store: Any, tasks: Sequence[Any], **enqueue: Any
) -> list[Rollout]:
    ids = [(await store.enqueue_rollout(task, **enqueue)).rollout_id for task in tasks]
    runner.max_rollouts = len(tasks)
    with runner.run_context(agent=agent, store=store):
        await runner.iter()
    return list(await store.wait_for_rollouts(rollout_ids=ids, timeout=5))


async def _latest_metadata(store: Any, rollout_id: str) -> dict[str, Any]:
    attempt = await store.get_latest_attempt(rollout_id)
    return attempt.metadata or {}


async def test_step_returns_the_succeeded_rollout_with_its_reward_span(store: CountingStore) -> None:
    runner = _runner()
    with runner.run_context(agent=ScriptedAgent(), store=store):
        rollout = await runner.step({"reward": 0.75})
    assert rollout.status == "succeeded"
    spans = await store.query_spans(rollout.rollout_id)
    assert [agl.get_reward_value(span) for span in spans] == [0.75]
    assert (await _latest_metadata(store, rollout.rollout_id))["final_reward"] == 0.75


async def test_rewards_emitted_while_running_are_stored_by_the_tracer(store: CountingStore) -> None:
    tracer = OtelTracer()
    runner = _runner(tracer=tracer)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        rollout = await runner.step({"emit": 0.4})
    spans = await store.query_spans(rollout.rollout_id)
    assert agl.find_final_reward(spans) == 0.4
    assert (await _latest_metadata(store, rollout.rollout_id))["final_reward"] == 0.4


async def test_returned_spans_and_span_fields_are_stored(store: CountingStore) -> None:
    fields = [agl.emit_reward(0.1, propagate=False), agl.emit_reward(0.2, propagate=False)]
    runner = _runner()
    with runner.run_context(agent=ScriptedAgent(), store=store):
        first = await runner.step({"return": fields})
        rollout_id = first.rollout_id
        attempt = await store.get_latest_attempt(rollout_id)
        assert attempt is not None
        span = Span.from_attributes(
            attributes={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.9},
            name="agentlightning.reward",
        )
        second = await runner.step({"return": [span]})
    assert [agl.get_reward_value(s) for s in await store.query_spans(rollout_id)] == [0.1, 0.2]
    stored = await store.query_spans(second.rollout_id)
    assert len(stored) == 1 and stored[0].sequence_id >= 1


async def test_iter_processes_rollouts_in_queue_order_up_to_max_rollouts(store: CountingStore) -> None:
    ids = [(await store.enqueue_rollout({"reward": i})).rollout_id for i in range(3)]
    runner = _runner(max_rollouts=2)
    with runner.run_context(agent=ScriptedAgent(), store=store):
        await runner.iter()
    statuses = [(await store.get_rollout_by_id(rollout_id)).status for rollout_id in ids]  # type: ignore[union-attr]
    assert statuses == ["succeeded", "succeeded", "queuing"]


async def _until(condition: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_iter_returns_soon_after_the_stop_event_is_set(store: CountingStore) -> None:
    event = ThreadingEvent()
    runner = _runner(min_poll_interval=60.0, poll_interval=60.0)  # an empty queue: the next poll would be in 60 s
    with runner.run_context(agent=ScriptedAgent(), store=store):
        task = asyncio.ensure_future(runner.iter(event=event))

        async def polled() -> bool:
            worker = await store.get_worker_by_id("Worker-0")
            return worker is not None and worker.last_dequeue_time is not None

        await _until(polled, "the first poll of the empty queue")
        event.set()
        await asyncio.wait_for(task, timeout=30.0)  # well before the next poll


async def test_train_rollouts_use_training_methods_and_others_validation(store: CountingStore) -> None:
    calls: list[str] = []

    class Agent(agl.LitAgent[Any]):
        async def training_rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
            calls.append("train")
            return 1.0

        async def validation_rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
            calls.append("val")
            return 0.0

    await store.enqueue_rollout({}, mode="train")
    await store.enqueue_rollout({}, mode="val")
    runner = _runner(max_rollouts=2)
    with runner.run_context(agent=Agent(), store=store):
        await runner.iter()
    assert calls == ["train", "val"]


async def test_an_agent_error_in_step_is_raised_and_the_attempt_failed(store: CountingStore) -> None:
    runner = _runner()
    with runner.run_context(agent=ScriptedAgent(), store=store), pytest.raises(RuntimeError, match="boom"):
        await runner.step({"raise": "boom"})
    (rollout,) = await store.query_rollouts()
    assert rollout.status == "failed"
    assert (await _latest_metadata(store, rollout.rollout_id))["error"] == "RuntimeError: boom"


@pytest.mark.parametrize("agent", [ScriptedAgent(), AsyncScriptedAgent()], ids=["sync", "async"])
async def test_misbehaving_agents_fail_their_attempt_and_the_runner_goes_on(store: CountingStore, agent: Any) -> None:
    tasks = [{"raise": "boom"}, {"exit": 3}, {"return": {"not": "a reward"}}, {"reward": 0.5}]
    if isinstance(agent, AsyncScriptedAgent):
        tasks[2] = {"raise": "again"}
    rollouts = await _serve(_runner(), agent, store, tasks)
    assert [r.status for r in rollouts] == ["failed", "failed", "failed", "succeeded"]
    reasons = [(await _latest_metadata(store, r.rollout_id)).get("error") for r in rollouts]
    assert reasons[0] == "RuntimeError: boom"
    assert reasons[1] == "the agent called sys.exit(3)"
    assert reasons[2] in (
        "TypeError: the agent returned a dict; expected None, a number (the reward), or a list of spans",
        "RuntimeError: again",
    )
    assert reasons[3] is None


@pytest.mark.parametrize(
    ("agent", "task"),
    [(ScriptedAgent(), {"sleep": 30}), (ScriptedAgent(), {"spin": 30}), (AsyncScriptedAgent(), {"sleep": 30})],
    ids=["sync-sleep", "sync-busy-loop", "async"],
)
async def test_an_agent_past_its_timeout_is_stopped_and_the_attempt_times_out(
    store: CountingStore, agent: Any, task: Any
) -> None:
    config = RolloutConfig(timeout_seconds=0.3)
    runner = _runner(heartbeat_interval=5.0)  # the runner's own timer fires before a heartbeat hears of it
    rollouts = await asyncio.wait_for(_serve(runner, agent, store, [task, {"reward": 1.0}], config=config), 20)
    attempt = await store.get_latest_attempt(rollouts[0].rollout_id)
    assert attempt is not None and attempt.status == "timeout"
    assert "did not finish within 0.3 s" in (attempt.metadata or {})["error"]
    assert rollouts[1].status == "succeeded"


async def test_hooks_run_in_order_and_rollout_end_receives_the_spans(store: CountingStore) -> None:
    events: list[str] = []
    received: list[Any] = []

    class Recorder(Hook):
        async def on_rollout_start(self, *, agent: Any, runner: Any, rollout: Any) -> None:
            events.append("rollout_start")

        async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
            events.append("trace_start")

        async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
            events.append("trace_end")

        async def on_rollout_end(self, *, agent: Any, runner: Any, rollout: Any, spans: Any) -> None:
            events.append("rollout_end")
            received.extend(spans)

    class Broken(Hook):
        async def on_rollout_start(self, *, agent: Any, runner: Any, rollout: Any) -> None:
            raise RuntimeError("hook bug")

    runner = _runner()
    with runner.run_context(agent=ScriptedAgent(), store=store, hooks=[Broken(), Recorder()]):
        rollout = await runner.step({"reward": 0.5})
    assert events == ["rollout_start", "trace_start", "trace_end", "rollout_end"]
    assert rollout.status == "succeeded"
    assert [agl.get_reward_value(span) for span in received] == [0.5]


async def test_resources_are_fetched_once_per_id_for_rollouts_enqueued_before(store: CountingStore) -> None:
    seen: list[Any] = []

    @agl.rollout
    def agent(task: Any, prompt_template: agl.PromptTemplate) -> float:
        seen.append(prompt_template.template)
        return 1.0

    update = await store.add_resources({"p": agl.PromptTemplate(template="v1", engine="f-string")})
    await _serve(_runner(), agent, store, [{}, {}, {}], resources_id=update.resources_id)
    assert seen == ["v1", "v1", "v1"] and store.resource_reads == 1
    await store.update_resources(update.resources_id, {"p": agl.PromptTemplate(template="v2", engine="f-string")})
    await _serve(_runner(), agent, store, [{}], resources_id=update.resources_id)
    assert seen[-1] == "v2"


async def test_an_unknown_resources_id_fails_the_attempt_with_the_id(store: CountingStore) -> None:
    (rollout,) = await _serve(_runner(), ScriptedAgent(), store, [{}], resources_id="missing-id")
    assert rollout.status == "failed"
    assert "'missing-id'" in (await _latest_metadata(store, rollout.rollout_id))["error"]


class BeatCountingAgent(agl.LitAgent[Any]):
    """Runs until the store has received `beats` attempt heartbeats (at most 30 s); `block_loop` waits without ever
    yielding to the event loop. `saw_beats` says whether they arrived."""

    def __init__(self, store: CountingStore, beats: int, block_loop: bool) -> None:
        super().__init__()
        self.store = store
        self.beats = beats
        self.block_loop = block_loop
        self.saw_beats = False

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        deadline = time.monotonic() + 30
        while self.store.attempt_beats < self.beats and time.monotonic() < deadline:
            if self.block_loop:
                time.sleep(0.01)
            else:
                await asyncio.sleep(0.01)
        self.saw_beats = self.store.attempt_beats >= self.beats
        return 1.0


async def test_a_long_attempt_and_its_worker_send_heartbeats(store: CountingStore) -> None:
    runner = _runner(heartbeat_interval=0.1)
    agent = BeatCountingAgent(store, beats=3, block_loop=False)
    await store.enqueue_rollout({})
    runner.max_rollouts = 1
    with runner.run_context(agent=agent, store=store):
        await runner.iter()
    assert agent.saw_beats
    (rollout,) = await store.query_rollouts()
    assert rollout.status == "succeeded"
    attempt = await store.get_latest_attempt(rollout.rollout_id)
    assert attempt is not None and attempt.last_heartbeat_time is not None
    worker = await store.get_worker_by_id("Worker-0")
    assert worker is not None and worker.heartbeat_stats is not None
    assert {"pid", "hostname", "cpu_percent", "memory_percent"} <= set(worker.heartbeat_stats)


@pytest.mark.parametrize("mode", ["thread", "asyncio"])
async def test_the_store_declaring_a_timeout_stops_the_agent(store: CountingStore, mode: str) -> None:
    runner = _runner(heartbeat_launch_mode=mode, heartbeat_interval=0.1)
    rollout = await store.enqueue_rollout({"sleep": 30}, config=RolloutConfig(timeout_seconds=60))
    runner.max_rollouts = 1
    with runner.run_context(agent=AsyncScriptedAgent(), store=store):
        task = asyncio.ensure_future(runner.iter())

        async def claimed() -> bool:
            return await store.get_latest_attempt(rollout.rollout_id) is not None

        await _until(claimed, "the runner to claim the rollout")
        await store.update_attempt(rollout.rollout_id, "latest", status="timeout")
        await asyncio.wait_for(task, timeout=20)  # long before the agent's 30 s sleep ends
    attempt = await store.get_latest_attempt(rollout.rollout_id)
    assert attempt is not None and "store marked the attempt as timed out" in (attempt.metadata or {})["error"]


async def test_an_agent_printing_megabytes_is_cut_and_the_rollout_succeeds(
    store: CountingStore, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = _runner(max_output_chars=1000)
    rollouts = await _serve(runner, ScriptedAgent(), store, [{"print": 5_000_000}, {"print": 10}])
    assert [r.status for r in rollouts] == ["succeeded", "succeeded"]
    out = capsys.readouterr().out
    assert len(out) < 3000
    assert f"rollout {rollouts[0].rollout_id} printed more than 1000 characters" in out


async def test_a_store_that_is_unreachable_at_start_fails_after_connect_timeout() -> None:
    from agentlightning.store.http.client.client import LightningStoreClient
    from agentlightning.store.http.client.retry import RetryPolicy

    client = LightningStoreClient("http://127.0.0.1:9", retry_policy=RetryPolicy(max_retries=0))
    runner = _runner(connect_timeout=0.5)
    with (
        runner.run_context(agent=ScriptedAgent(), store=client),
        pytest.raises(agl.StoreUnreachableError, match=r"http://127\.0\.0\.1:9 within 0\.5 s"),
    ):
        await asyncio.wait_for(runner.iter(), timeout=20)
    await client.close()


class OutageStore(InMemoryLightningStore):
    """A real in-memory store whose claims and attempt updates fail with ConnectionError while `down` is True."""

    down = False
    failed_status_writes = 0

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Any:
        if self.down:
            raise ConnectionError("store restarting")
        return await super().dequeue_rollout(worker_id=worker_id)

    async def update_attempt(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            if kwargs.get("status") is not None:
                self.failed_status_writes += 1
            raise ConnectionError("store restarting")
        return await super().update_attempt(*args, **kwargs)


class GatedAgent(agl.LitAgent[Any]):
    """{"gated": True} signals `started`, then waits for `gate` (at most 30 s); every task returns a reward of 1."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.gate = threading.Event()

    def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
        if task.get("gated"):
            self.started.set()
            self.gate.wait(30)
        return 1.0


async def test_a_store_outage_mid_run_is_ridden_out() -> None:
    store = OutageStore()
    ids = [(await store.enqueue_rollout({"gated": i == 0})).rollout_id for i in range(3)]
    runner = _runner(max_rollouts=3)
    agent = GatedAgent()
    with runner.run_context(agent=agent, store=store):
        task = asyncio.ensure_future(runner.iter())
        assert await asyncio.to_thread(agent.started.wait, 30)
        store.down = True
        agent.gate.set()  # the first attempt finishes while the store is down

        async def status_write_failed() -> bool:
            return store.failed_status_writes >= 1

        await _until(status_write_failed, "the first attempt's status write to meet the outage")
        store.down = False
        await asyncio.wait_for(task, timeout=30)
    rollouts = await store.wait_for_rollouts(rollout_ids=ids, timeout=5)
    assert [r.status for r in rollouts] == ["succeeded"] * 3


async def test_thread_heartbeats_keep_going_while_an_async_agent_blocks_the_loop(store: CountingStore) -> None:
    runner = _runner(heartbeat_launch_mode="thread", heartbeat_interval=0.1)
    agent = BeatCountingAgent(store, beats=3, block_loop=True)
    rollout = await store.enqueue_rollout({})
    runner.max_rollouts = 1
    with runner.run_context(agent=agent, store=store):
        await runner.iter()
    assert agent.saw_beats  # beats arrived while the agent kept the runner's loop blocked
    finished = await store.get_rollout_by_id(rollout.rollout_id)
    assert finished is not None and finished.status == "succeeded"
