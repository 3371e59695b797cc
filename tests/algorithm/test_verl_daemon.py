"""The VERL daemon against a real store: publish the policy, enqueue n copies per sample, collect and convert.

A scripted runner plays the agents: it claims rollouts, records one LLM call with token ids and a reward per rollout
(as the LLM proxy would), and finishes the attempt. No verl, no GPU, no model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agentlightning.adapter import LlmProxyTraceToTriplet, TraceToMessages
from agentlightning.algorithm.verl.daemon import AgentModeDaemon, native, samples_from_columns
from agentlightning.llm_proxy import LLMProxy
from agentlightning.store.memory.store import InMemoryLightningStore
from agentlightning.types import ProxyLLM, Span
from agentlightning.utils.io_loop import io_loop

np = pytest.importorskip("numpy")


def proxy_call(rollout_id: str, attempt_id: str, sequence_id: int, prompt: list[int], response: list[int]) -> Span:
    return Span.from_attributes(
        attributes={
            "prompt_token_ids": prompt,
            "response_token_ids": response,
            "gen_ai.response.id": f"{rollout_id}-c",
        },
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        name="raw_gen_ai_request",
    )


def reward_span(rollout_id: str, attempt_id: str, sequence_id: int, value: float) -> Span:
    return Span.from_attributes(
        attributes={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value},
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        name="agentlightning.annotation",
    )


async def scripted_runner(
    store: InMemoryLightningStore, expected: int, *, with_ids: bool = True
) -> list[dict[str, object]]:
    """Claim `expected` rollouts; answer task {"x": k} with response [k] and reward k / 10."""
    seen: list[dict[str, object]] = []
    while len(seen) < expected:
        claimed = await store.dequeue_rollout(worker_id="w1")
        if claimed is None:
            await asyncio.sleep(0.01)
            continue
        task = claimed.input
        assert isinstance(task, dict)
        seen.append(task)
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        x = int(task["x"])
        if with_ids:
            await store.add_span(proxy_call(rid, aid, 1, [100, x], [x]))
        await store.add_span(reward_span(rid, aid, 2, x / 10))
        await store.update_attempt(rid, aid, status="succeeded")
    return seen


@pytest.fixture
def store() -> InMemoryLightningStore:
    return InMemoryLightningStore()


@pytest.fixture
def daemon(store: InMemoryLightningStore) -> Iterator[AgentModeDaemon]:
    proxy = LLMProxy(store=store)
    daemon = AgentModeDaemon(
        train_rollout_n=2,
        train_information={"model": "policy", "temperature": 0.7},
        pad_token_id=0,
        llm_proxy=proxy,
        store=store,
        adapter=LlmProxyTraceToTriplet(),
        poll_interval=0.05,
    )
    yield daemon
    daemon.close()
    if proxy.is_running():
        proxy.stop()


def run_runner(
    daemon: AgentModeDaemon, store: InMemoryLightningStore, expected: int, **kwargs: bool
) -> list[dict[str, object]]:
    future = io_loop().submit(scripted_runner(store, expected, **kwargs))
    daemon.run_until_all_finished(timeout_seconds=60)
    return future.result(timeout=60)


def test_training_samples_are_enqueued_n_times_with_a_shared_data_id(
    daemon: AgentModeDaemon, store: InMemoryLightningStore
) -> None:
    columns = {"x": np.array([1, 2]), "data_source": np.array(["a", "b"], dtype=object)}
    ids = daemon.set_up_data_and_server(columns, ["127.0.0.1:8000"], is_train=True)
    assert len(ids) == 4
    tasks = run_runner(daemon, store, 4)
    by_x: dict[object, set[object]] = {}
    for task in tasks:
        by_x.setdefault(task["x"], set()).add(task["data_id"])
        assert type(task["x"]) is int  # numpy values arrive as plain Python values
    assert {x: len(data_ids) for x, data_ids in by_x.items()} == {1: 1, 2: 1}
    assert by_x[1] != by_x[2]
    rollouts = io_loop().run(store.query_rollouts())
    assert {r.mode for r in rollouts} == {"train"}
    assert all(r.metadata["is_train"] is True and r.metadata["data_id"] == r.input["data_id"] for r in rollouts)  # type: ignore[index]
    assert all(r.config.timeout_seconds == 1200.0 for r in rollouts)


def test_the_policy_is_published_as_a_proxy_llm_routed_to_the_vllm_servers(
    daemon: AgentModeDaemon, store: InMemoryLightningStore
) -> None:
    daemon.set_up_data_and_server([{"x": 1}], ["127.0.0.1:8000", "http://127.0.0.1:8001"])
    assert daemon.llm_proxy is not None and daemon.llm_proxy.is_running()
    assert [m["litellm_params"]["api_base"] for m in daemon.llm_proxy.model_list] == [
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8001/v1",
    ]
    assert all(m["litellm_params"]["model"] == "hosted_vllm/policy" for m in daemon.llm_proxy.model_list)
    assert daemon.resources_id is not None
    update = io_loop().run(store.get_resources_by_id(daemon.resources_id))
    assert update is not None
    llm = update.resources["main_llm"]
    assert isinstance(llm, ProxyLLM)
    assert llm.model == "policy" and llm.sampling_parameters == {"temperature": 0.7}
    assert llm.endpoint == daemon.llm_proxy.endpoint


def test_finished_rollouts_become_a_training_batch_grouped_by_data_id(
    daemon: AgentModeDaemon, store: InMemoryLightningStore
) -> None:
    daemon.set_up_data_and_server([{"x": 3}, {"x": 5}], ["127.0.0.1:8000"])
    run_runner(daemon, store, 4)
    batch = daemon.get_train_batch(max_prompt_length=3, max_response_length=2)
    assert len(batch) == 4
    rows = sorted(zip(batch.prompts, batch.responses, batch.token_level_scores, batch.uid, strict=True))
    assert [row[:3] for row in rows] == [
        ([0, 100, 3], [3, 0], [0.3, 0.0]),
        ([0, 100, 3], [3, 0], [0.3, 0.0]),
        ([0, 100, 5], [5, 0], [0.5, 0.0]),
        ([0, 100, 5], [5, 0], [0.5, 0.0]),
    ]
    assert rows[0][3] == rows[1][3] != rows[2][3] == rows[3][3]
    assert batch.metrics["training/n_rollouts"] == 4
    assert batch.metrics["training/n_rollouts_failed"] == 0
    assert batch.metrics["training/reward"] == pytest.approx(0.4)


def test_rollouts_without_token_ids_make_a_clear_error(daemon: AgentModeDaemon, store: InMemoryLightningStore) -> None:
    from agentlightning.algorithm.verl.batch import MissingTokenIdsError

    daemon.set_up_data_and_server([{"x": 1}], ["127.0.0.1:8000"])
    run_runner(daemon, store, 2, with_ids=False)
    # The proxy adapter finds no LLM call without ids; the rollout counts as one without a trace.
    batch = daemon.get_train_batch(max_prompt_length=2, max_response_length=1)
    assert len(batch) == 0 and batch.metrics["training/n_rollouts_w_trace"] == 0
    daemon.adapter = _NoIdsAdapter()
    daemon._finished = {}  # pyright: ignore[reportPrivateUsage]
    daemon.run_until_all_finished(timeout_seconds=10)
    with pytest.raises(MissingTokenIdsError, match="without token ids"):
        daemon.get_train_batch(max_prompt_length=2, max_response_length=1)


class _NoIdsAdapter(LlmProxyTraceToTriplet):
    def adapt(self, source):  # type: ignore[no-untyped-def, override]
        from agentlightning.types import Triplet

        return [Triplet(prompt={"text": "q"}, response={"text": "a"}, reward=1.0)]


def test_validation_enqueues_once_per_sample_and_reports_metrics_per_data_source(
    daemon: AgentModeDaemon, store: InMemoryLightningStore
) -> None:
    daemon.set_up_data_and_server({"x": [2, 4], "data_source": ["a", "b"]}, ["127.0.0.1:8000"], is_train=False)
    run_runner(daemon, store, 2)
    metrics = daemon.get_test_metrics()
    assert metrics["val/reward"] == pytest.approx(0.3)
    assert metrics["val/n_rollouts"] == 2
    assert metrics["val/n_rollouts_w_trace"] == 2
    assert metrics["val/mean_response_length"] == 1
    assert metrics["val/turn_count"] == 1
    assert metrics["val/a/reward"] == pytest.approx(0.2)
    assert metrics["val/b/reward"] == pytest.approx(0.4)
    with pytest.raises(RuntimeError, match="validation"):
        daemon.get_train_batch(2, 1)


def test_waiting_without_runners_times_out_naming_the_rollouts(daemon: AgentModeDaemon) -> None:
    daemon.set_up_data_and_server([{"x": 1}], ["127.0.0.1:8000"])
    with pytest.raises(TimeoutError, match="are runners connected"):
        daemon.run_until_all_finished(timeout_seconds=0.2)


def test_bad_construction_is_rejected(store: InMemoryLightningStore) -> None:
    with pytest.raises(ValueError, match=r"v0\.1 HTTP protocol"):
        AgentModeDaemon(mode="v0", store=store, pad_token_id=0)
    with pytest.raises(ValueError, match="store"):
        AgentModeDaemon(pad_token_id=0)
    with pytest.raises(TypeError, match="TraceToTripletBase"):
        AgentModeDaemon(store=store, pad_token_id=0, adapter=TraceToMessages())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="level"):
        AgentModeDaemon(store=store, pad_token_id=0, trace_aggregator={"level": "episode"})
    with pytest.raises(ValueError, match="pad_token_id"):
        AgentModeDaemon(store=store)


def test_numpy_columns_become_plain_samples() -> None:
    assert native({"a": np.int64(3), "b": np.array([1.5, 2.5])}) == {"a": 3, "b": [1.5, 2.5]}
    assert samples_from_columns({"a": np.array([1, 2]), "b": ["x", "y"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(ValueError, match="different lengths"):
        samples_from_columns({"a": [1, 2], "b": [1]})
    with pytest.raises(TypeError, match="Sample 0"):
        samples_from_columns([3])


def test_the_upstream_model_name_is_asked_from_the_vllm_server(store: InMemoryLightningStore) -> None:
    from agentlightning.algorithm.verl.daemon import served_model_name

    from ..fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        address = server.base_url.removeprefix("http://").removesuffix("/v1")
        served = served_model_name(address)
        assert served == "fake-model"  # the first id the server lists
        proxy = LLMProxy(store=store)
        daemon = AgentModeDaemon(
            train_information={"model": "Qwen/Qwen2.5"}, pad_token_id=0, llm_proxy=proxy, store=store
        )
        try:
            daemon.set_up_data_and_server([{"x": 1}], [address])
            (entry,) = proxy.model_list
            assert entry["model_name"] == "Qwen/Qwen2.5"  # what agents call
            assert entry["litellm_params"]["model"] == f"hosted_vllm/{served}"  # what vLLM answers to
        finally:
            daemon.close()
            proxy.stop()
    assert served_model_name("127.0.0.1:9", timeout=2) is None  # nothing listens there


def test_the_initial_resources_are_published_next_to_the_policy(store: InMemoryLightningStore) -> None:
    from agentlightning.types import PromptTemplate

    prompt = PromptTemplate(template="Solve {x}", engine="f-string")
    proxy = LLMProxy(store=store)
    daemon = AgentModeDaemon(
        train_information={"model": "policy"},
        pad_token_id=0,
        llm_proxy=proxy,
        store=store,
        initial_resources={"prompt": prompt, "main_llm": ProxyLLM(endpoint="http://old", model="old")},
    )
    try:
        daemon.set_up_data_and_server([{"x": 1}], ["127.0.0.1:8000"])
        assert daemon.resources_id is not None
        update = io_loop().run(store.get_resources_by_id(daemon.resources_id))
    finally:
        daemon.close()
        if proxy.is_running():
            proxy.stop()
    assert update is not None and update.resources["prompt"] == prompt
    assert update.resources["main_llm"].model == "policy"  # the policy replaces an initial resource of its name


def test_verl_hands_the_trainers_initial_resources_to_the_ray_side(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlightning.algorithm.verl import entrypoint, interface
    from agentlightning.types import PromptTemplate

    captured: dict[str, object] = {}
    monkeypatch.setattr(entrypoint, "run_ppo", lambda config, **kwargs: captured.update(kwargs))
    monkeypatch.setattr(interface, "check_datasets", lambda *args: None)
    algorithm = interface.VERL.__new__(interface.VERL)  # no verl here: skip composing its configuration
    algorithm.config, algorithm.trainer_cls, algorithm.daemon_cls = None, None, None
    algorithm.set_store(InMemoryLightningStore())
    prompt = PromptTemplate(template="Solve {x}", engine="f-string")
    algorithm.set_initial_resources({"prompt": prompt})
    algorithm.run([{"x": 1}], [{"x": 2}])
    assert captured["initial_resources"] == {"prompt": prompt}


def test_the_proxys_recorded_log_probs_reach_the_training_batch(
    daemon: AgentModeDaemon, store: InMemoryLightningStore
) -> None:
    from agentlightning.llm_proxy.record import CallRecord

    async def runner() -> None:
        done = 0
        while done < 2:
            claimed = await store.dequeue_rollout(worker_id="w1")
            if claimed is None:
                await asyncio.sleep(0.01)
                continue
            rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
            record = CallRecord(rid, aid, "chat", {"model": "policy", "messages": []}, "http://up", False)
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": "ab"},
                "finish_reason": "stop",
                "token_ids": [7, 8],
                "logprobs": {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -0.25}]},
            }
            record.finish(response={"id": f"{rid}-c", "prompt_token_ids": [100], "choices": [choice]}, status_code=200)
            await store.add_span(record.to_span(1))
            await store.add_span(reward_span(rid, aid, 2, 1.0))
            await store.update_attempt(rid, aid, status="succeeded")
            done += 1

    daemon.set_up_data_and_server([{"x": 1}], ["127.0.0.1:8000"])
    assert daemon.llm_proxy is not None and daemon.llm_proxy.request_logprobs
    future = io_loop().submit(runner())
    daemon.run_until_all_finished(timeout_seconds=60)
    future.result(timeout=60)
    batch = daemon.get_train_batch(max_prompt_length=1, max_response_length=3)
    assert batch.rollout_log_probs == [[-0.5, -0.25, 0.0]] * 2
    assert batch.rollout_log_probs_mask == [[1, 1, 0]] * 2
