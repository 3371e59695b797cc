"""Rollouts with captured calls, written into a store the way a runner records them (for the export tests)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.store.base import LightningStore
from agentlightning.types import Span

_ids = itertools.count(1)


@dataclass
class Call:
    """One LLM call: exact ids, the messages the model saw, its answer, and optionally the agent that made it."""

    prompt_ids: list[int]
    response_ids: list[int]
    prompt: list[dict[str, Any]] = field(default_factory=lambda: [{"role": "user", "content": "hi"}])
    answer: str = "ok"
    tool_calls: Optional[str] = None  # JSON text, as the LLM proxy records it
    functions: Optional[list[dict[str, Any]]] = None


def _call_attributes(call: Call) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "prompt_token_ids": call.prompt_ids,
        "response_token_ids": call.response_ids,
        "gen_ai.response.id": f"chatcmpl-{next(_ids)}",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": call.answer,
    }
    for index, message in enumerate(call.prompt):
        for key, value in message.items():
            attributes[f"gen_ai.prompt.{index}.{key}"] = value
    if call.tool_calls is not None:
        attributes["gen_ai.completion.0.tool_calls"] = call.tool_calls
    for index, function in enumerate(call.functions or []):
        for key, value in function.items():
            attributes[f"gen_ai.request.functions.{index}.{key}"] = value
    return attributes


async def add_rollout(
    store: LightningStore,
    calls: list[Call],
    reward: Optional[float],
    *,
    task: Any = "task",
    metadata: Optional[dict[str, Any]] = None,
    status: str = "succeeded",
    agent: Optional[str] = None,
    client_side: bool = True,
    resources_id: Optional[str] = None,
    mode: str = "train",
) -> str:
    """A finished rollout whose spans hold `calls` (under an agent span named `agent` when given) and `reward`.

    `client_side=False` records the calls as the LLM proxy does (no client-side LLM span, no agent).
    """
    attempted = await store.start_rollout(task, mode=mode, metadata=metadata, resources_id=resources_id)  # type: ignore[arg-type]
    rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
    trace = f"{next(_ids):032x}"
    spans: list[Span] = []
    root = f"{next(_ids):016x}"
    spans.append(
        Span.from_attributes(
            attributes={"agent.name": agent} if agent else {},
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=1,
            name="agent" if agent else "rollout",
            trace_id=trace,
            span_id=root,
            parent_id=None,
            start_time=0.0,
            end_time=100.0,
        )
    )
    for index, call in enumerate(calls):
        spans.append(
            Span.from_attributes(
                attributes=_call_attributes(call),
                rollout_id=rollout_id,
                attempt_id=attempt_id,
                sequence_id=index + 2,
                name="openai.chat.completion" if client_side else "llm_proxy.chat",
                trace_id=trace,
                span_id=f"{next(_ids):016x}",
                parent_id=root if client_side else None,
                start_time=1.0 + index,
                end_time=1.5 + index,
            )
        )
    if reward is not None:
        spans.append(
            Span.from_attributes(
                attributes={"reward": reward},
                rollout_id=rollout_id,
                attempt_id=attempt_id,
                sequence_id=len(calls) + 2,
                name="agentlightning.reward",
                trace_id=trace,
                span_id=f"{next(_ids):016x}",
                parent_id=root,
                start_time=50.0,
                end_time=50.0,
            )
        )
    await store.add_many_spans(spans)
    await store.update_attempt(rollout_id, attempt_id, status=status)  # type: ignore[arg-type]
    return rollout_id


def two_turns(first_prompt: list[int], env: list[int], answers: tuple[list[int], list[int]]) -> list[Call]:
    """A conversation of two calls whose second prompt extends the first: prompt, answer, tool result, answer."""
    first = Call(first_prompt, answers[0], prompt=[{"role": "user", "content": "add 2 and 3"}], answer="call add")
    second = Call(
        first_prompt + answers[0] + env,
        answers[1],
        prompt=[
            {"role": "user", "content": "add 2 and 3"},
            {"role": "assistant", "content": "call add"},
            {"role": "tool", "content": "5", "tool_call_id": "call-1"},
        ],
        answer="5",
    )
    return [first, second]
