"""A realistic training run written through the store API, for the dashboard tests and the benchmark.

`build_run(store)` leaves the store as a short APO-style run would: two prompt-template versions, runners with
system snapshots and heartbeats, rollouts in every status (one retried after an attempt failed with a traceback,
one that failed for good, one timed out, one still running, one never claimed), a recorded multi-agent trace, LLM
calls recorded the way the LLM proxy records them (with token ids), and reward spans. Everything goes through the
public store API, so the dashboard sees exactly what a real run leaves behind.

When the runtime lands, `Trainer.fit` produces the same kinds of records; tests that only need "a run" take a
`RunData` and do not care which one built it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import agentlightning as agl
from agentlightning.llm_proxy.record import CallRecord
from agentlightning.store import LightningStore
from agentlightning.types import Span

ASSETS = Path(__file__).resolve().parents[1] / "assets"

PROMPT_V1 = "You are a helpful assistant.\nSolve the task: {task}\nAnswer with a single number."
PROMPT_V2 = (
    "You are a careful assistant who checks their work.\n"
    "Solve the task step by step: {task}\n"
    "Answer with a single number."
)
XSS_SCRIPT = "<script>window.__agl_xss = 'script'</script>"
XSS_IMG = "<img src=x onerror=\"window.__agl_xss = 'img'\">"


@dataclass
class RunData:
    """Ids of the interesting records of a run, for tests to look up."""

    resources_v1: str = ""
    resources_v2: str = ""
    succeeded: list[str] = field(default_factory=list)
    multi_agent: str = ""
    proxied: str = ""
    retried: str = ""
    failed: str = ""
    timed_out: str = ""
    running: str = ""
    queued: str = ""
    cancelled: str = ""
    requeuing: str = ""
    workers: list[str] = field(default_factory=list)
    final_rewards: dict[str, float] = field(default_factory=dict)


def system_snapshot(cpu: float, memory: float) -> dict[str, Any]:
    """A heartbeat's system snapshot (CPU, memory, disk) in the nested layout runners send."""
    total = 24 * 1024**3
    return {
        "cpu": {"percent": cpu, "count": 2},
        "memory": {"percent": memory, "used": int(total * memory / 100), "total": total},
        "disk": {"percent": 52.0},
        "pid": 4242,
    }


async def add_spans(store: LightningStore, spans: list[Span]) -> list[Span]:
    """Store `spans`, allocating their sequence ids in order (as a tracer's writer does)."""
    if not spans:
        return []
    ids = await store.get_many_span_sequence_ids([(span.rollout_id, span.attempt_id) for span in spans])
    stored = [
        span.model_copy(update={"sequence_id": sequence_id}) for span, sequence_id in zip(spans, ids, strict=True)
    ]
    return list(await store.add_many_spans(stored))


def reward_span(rollout_id: str, attempt_id: str, value: float, **dimensions: float) -> Span:
    reward: Any = {"primary": value, **dimensions} if dimensions else value
    core = agl.emit_reward(reward, primary_key="primary" if dimensions else None, propagate=False)
    assert core is not None
    return Span.from_core_fields(core, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=0)


def exception_span(rollout_id: str, attempt_id: str, exception: BaseException) -> Span:
    core = agl.emit_exception(exception, propagate=False)
    assert core is not None
    return Span.from_core_fields(core, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=0)


def raised(exception: BaseException) -> BaseException:
    """`exception` with a real traceback (raised and caught two frames deep)."""

    def parse_answer(text: str) -> int:
        raise exception

    def score(text: str) -> int:
        return parse_answer(text)

    try:
        score("forty-two")
    except BaseException as caught:
        return caught
    raise AssertionError("unreachable")


def proxy_call_span(
    rollout_id: str, attempt_id: str, question: str, answer: str, *, start: float, with_token_ids: bool = True
) -> Span:
    """An LLM call exactly as the LLM proxy records it (request/response JSON, token ids from the server)."""
    request = {
        "model": "SmolLM2-135M-Instruct",
        "messages": [
            {"role": "system", "content": "You are a careful assistant who checks their work."},
            {"role": "user", "content": question},
        ],
        "temperature": 0.7,
        "max_tokens": 32,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "calculator",
                    "description": "Evaluate an arithmetic expression.",
                    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
                },
            }
        ],
    }
    prompt_ids = [1, 9690, 198, *range(2000, 2024)]
    response_ids = [504, 3060, 2]
    response: dict[str, Any] = {
        "id": f"chatcmpl-{os.urandom(4).hex()}",
        "object": "chat.completion",
        "model": "SmolLM2-135M-Instruct",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
                **({"token_ids": response_ids} if with_token_ids else {}),
            }
        ],
        "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(response_ids), "total_tokens": 30},
    }
    if with_token_ids:
        response["prompt_token_ids"] = prompt_ids
    record = CallRecord(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        kind="chat",
        request=request,
        upstream="http://127.0.0.1:8000/v1",
        stream=False,
        start_time=start,
    )
    record.attempts = 1
    record.finish(response=response, status_code=200)
    record.end_time = start + 0.35
    return record.to_span(0)


def recorded_multi_agent_trace(rollout_id: str, attempt_id: str) -> list[Span]:
    """The recorded planner -> coder handoff trace (tests/assets), moved onto this rollout attempt."""
    raw = json.loads((ASSETS / "multi_agent_trace.json").read_text())
    shift = time.time() - max(span["end_time"] for span in raw)
    spans = []
    for item in raw:
        item = {**item, "rollout_id": rollout_id, "attempt_id": attempt_id, "sequence_id": 0}
        item["start_time"] += shift
        item["end_time"] += shift
        spans.append(Span.model_validate(item))
    return spans


async def _claim(store: LightningStore, worker_id: str, rollout_id: str) -> str:
    """Dequeue until `rollout_id` comes out (it is the only queued one when called); returns its attempt id."""
    claimed = await store.dequeue_rollout(worker_id=worker_id)
    assert claimed is not None and claimed.rollout_id == rollout_id, claimed
    return claimed.attempt.attempt_id


async def _run_attempt(
    store: LightningStore, worker: str, rollout_id: str, status: str, spans: Callable[[str], list[Span]]
) -> str:
    """One attempt: `worker` claims the rollout, stores `spans(attempt_id)` and ends it with `status`."""
    attempt = await _claim(store, worker, rollout_id)
    await add_spans(store, spans(attempt))
    if status != "running":
        await store.update_attempt(rollout_id, attempt, status=status)
    return attempt


async def build_run(store: LightningStore, *, extra_succeeded: int = 12, pause: float = 0.02) -> RunData:
    """Fill `store` with a realistic run (see the module docstring). Takes about a second."""
    data = RunData()
    llm = agl.LLM(
        endpoint="http://127.0.0.1:8000/v1",
        model="SmolLM2-135M-Instruct",
        api_key="sk-do-not-show-this-key",
        sampling_parameters={"temperature": 0.7},
    )
    v1 = await store.add_resources({"prompt": agl.PromptTemplate(template=PROMPT_V1, engine="f-string"), "llm": llm})
    data.resources_v1 = v1.resources_id
    data.workers = ["runner-0", "runner-1", "runner-2"]
    for index, worker in enumerate(data.workers):
        await store.update_worker(worker, heartbeat_stats=system_snapshot(20.0 + 25 * index, 35.0 + 10 * index))

    # Version 1: a few rollouts with modest rewards, one of them the recorded multi-agent trace.
    data.multi_agent = (await store.enqueue_rollout({"task": "build a sorter"}, mode="train")).rollout_id
    await _run_attempt(
        store, "runner-0", data.multi_agent, "succeeded", lambda at: recorded_multi_agent_trace(data.multi_agent, at)
    )
    data.final_rewards[data.multi_agent] = 1.0
    data.succeeded.append(data.multi_agent)
    for index in range(extra_succeeded // 2):
        await _succeed_with_reward(store, data, f"What is {index} + {index}?", 0.2 + 0.03 * index, "runner-1")
        await asyncio.sleep(pause)

    # A rollout whose first attempt failed with a traceback and whose retry succeeded.
    retry_config = agl.RolloutConfig(max_attempts=2, retry_condition=["failed"])
    data.retried = (
        await store.enqueue_rollout({"task": "What is 6 * 7?"}, mode="train", config=retry_config)
    ).rollout_id
    await _run_attempt(
        store,
        "runner-0",
        data.retried,
        "failed",
        lambda at: [
            proxy_call_span(data.retried, at, "What is 6 * 7?", "forty-two", start=time.time() - 0.5),
            exception_span(data.retried, at, raised(ValueError("could not parse 'forty-two' as a number"))),
        ],
    )
    await _run_attempt(
        store,
        "runner-1",
        data.retried,
        "succeeded",
        lambda at: [
            proxy_call_span(data.retried, at, "What is 6 * 7?", "42", start=time.time() - 0.4),
            reward_span(data.retried, at, 1.0),
        ],
    )
    data.final_rewards[data.retried] = 1.0
    data.succeeded.append(data.retried)

    # Version 2 of the prompt: better rewards.
    v2 = await store.add_resources(
        {
            "prompt": agl.PromptTemplate(template=PROMPT_V2, engine="f-string"),
            "llm": llm.model_copy(update={"sampling_parameters": {"temperature": 0.5}}),
        }
    )
    data.resources_v2 = v2.resources_id
    data.proxied = await _succeed_with_reward(store, data, "What is 12 * 12?", 0.8, "runner-1", answer="144")
    for index in range(extra_succeeded - extra_succeeded // 2):
        await _succeed_with_reward(store, data, f"What is {index} * 3?", 0.6 + 0.03 * index, "runner-2")
        await asyncio.sleep(pause)

    # Failures: one for good (no retry allowed), one timed out.
    data.failed = (await store.enqueue_rollout({"task": "What is the square root of -1?"}, mode="train")).rollout_id
    await _run_attempt(
        store,
        "runner-2",
        data.failed,
        "failed",
        lambda at: [
            proxy_call_span(data.failed, at, "What is the square root of -1?", "i", start=time.time() - 0.3),
            exception_span(data.failed, at, raised(KeyError("answer"))),
        ],
    )
    data.timed_out = (await store.enqueue_rollout({"task": "Count to a billion"}, mode="val")).rollout_id
    await _run_attempt(store, "runner-1", data.timed_out, "timeout", lambda at: [])

    # One still running, one waiting for its retry, one cancelled, one never claimed.
    data.running = (await store.enqueue_rollout({"task": "What is 99 + 1?"}, mode="train")).rollout_id
    attempt = await _run_attempt(
        store,
        "runner-2",
        data.running,
        "running",
        lambda at: [proxy_call_span(data.running, at, "What is 99 + 1?", "100", start=time.time() - 0.2)],
    )
    await store.update_attempt(data.running, attempt, last_heartbeat_time=time.time())
    data.requeuing = (
        await store.enqueue_rollout({"task": "What is 7 - 9?"}, mode="train", config=retry_config)
    ).rollout_id
    await _run_attempt(
        store,
        "runner-0",
        data.requeuing,
        "failed",
        lambda at: [
            exception_span(data.requeuing, at, raised(TimeoutError("the model server did not answer in 30 s")))
        ],
    )
    data.cancelled = (await store.enqueue_rollout({"task": "Never mind"}, mode="test")).rollout_id
    await store.update_rollout(data.cancelled, status="cancelled")
    data.queued = (await store.enqueue_rollout({"task": "What is 5 + 5?"}, mode="train")).rollout_id
    for index, worker in enumerate(data.workers):
        await store.update_worker(worker, heartbeat_stats=system_snapshot(30.0 + 20 * index, 40.0 + 12 * index))
    return data


async def _succeed_with_reward(
    store: LightningStore, data: RunData, question: str, reward: float, worker: str, answer: str = "0"
) -> str:
    rollout_id = (await store.enqueue_rollout({"task": question}, mode="train")).rollout_id
    await _run_attempt(
        store,
        worker,
        rollout_id,
        "succeeded",
        lambda at: [
            proxy_call_span(rollout_id, at, question, answer, start=time.time() - 0.4),
            reward_span(rollout_id, at, round(reward, 4), correct=1.0 if reward > 0.5 else 0.0),
        ],
    )
    data.final_rewards[rollout_id] = round(reward, 4)
    data.succeeded.append(rollout_id)
    return rollout_id


async def add_hostile_rollout(store: LightningStore) -> str:
    """A rollout whose input, span name, attributes and metadata carry <script> and <img onerror> payloads."""
    payload = f"{XSS_SCRIPT}{XSS_IMG}"
    rollout = await store.start_rollout(
        {"task": payload, "note": XSS_IMG}, mode="train", metadata={"comment": payload}, worker_id="runner-0"
    )
    attempt = rollout.attempt.attempt_id
    span = proxy_call_span(rollout.rollout_id, attempt, payload, payload, start=time.time() - 0.2)
    named = Span.from_attributes(
        attributes={"tool.name": payload, "input.value": payload, XSS_IMG: XSS_SCRIPT},
        rollout_id=rollout.rollout_id,
        attempt_id=attempt,
        name=f"tool {XSS_IMG}",
        start_time=time.time() - 0.1,
        end_time=time.time(),
    )
    await add_spans(store, [span, named, reward_span(rollout.rollout_id, attempt, 0.5)])
    await store.update_attempt(rollout.rollout_id, attempt, status="succeeded")
    return rollout.rollout_id


async def add_wide_rollout(store: LightningStore, spans: int, *, attribute_bytes: int = 200) -> str:
    """A succeeded rollout with `spans` spans in a tree (agent -> turns -> LLM calls and tools) and a reward."""
    rollout = await store.start_rollout(
        {"task": f"a long episode with {spans} spans"}, mode="train", worker_id="runner-0"
    )
    attempt = rollout.attempt.attempt_id
    start = time.time() - spans * 0.01
    root = Span.from_attributes(
        attributes={"agent.name": "solver", "openinference.span.kind": "AGENT"},
        rollout_id=rollout.rollout_id,
        attempt_id=attempt,
        name="agent run",
        start_time=start,
        end_time=start + spans * 0.01,
    )
    made: list[Span] = [root]
    turn: Optional[Span] = None
    filler = "x" * attribute_bytes
    for index in range(spans - 2):
        at = start + index * 0.01
        if index % 10 == 0:
            turn = Span.from_attributes(
                attributes={"openinference.span.kind": "CHAIN", "turn": index // 10},
                rollout_id=rollout.rollout_id,
                attempt_id=attempt,
                name=f"turn {index // 10}",
                parent_id=root.span_id,
                trace_id=root.trace_id,
                start_time=at,
                end_time=at + 0.1,
            )
            made.append(turn)
            continue
        assert turn is not None
        if index % 3 == 0:
            made.append(
                Span.from_attributes(
                    attributes={"tool.name": "calculator", "input.value": filler, "output.value": str(index)},
                    rollout_id=rollout.rollout_id,
                    attempt_id=attempt,
                    name="calculator",
                    parent_id=turn.span_id,
                    trace_id=root.trace_id,
                    start_time=at,
                    end_time=at + 0.005,
                )
            )
        else:
            call = proxy_call_span(rollout.rollout_id, attempt, f"step {index} {filler}", str(index), start=at)
            made.append(call.model_copy(update={"trace_id": root.trace_id, "parent_id": turn.span_id}))
    made.append(reward_span(rollout.rollout_id, attempt, 0.75))
    for offset in range(0, len(made), 500):
        await add_spans(store, made[offset : offset + 500])
    await store.update_attempt(rollout.rollout_id, attempt, status="succeeded")
    return rollout.rollout_id
