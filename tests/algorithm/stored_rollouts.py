"""Rollouts written into a real store as a runner and the LLM proxy would leave them: LLM calls with token ids and
reward spans (in time order), then the attempt's status and metadata."""

from __future__ import annotations

from typing import Any, Optional, Union

from agentlightning.store.base import LightningStore
from agentlightning.types import Rollout, Span

Call = tuple[str, list[int], list[int]]  # ("call", prompt ids, response ids)
Reward = tuple[str, float]  # ("reward", value)


async def stored_rollout(
    store: LightningStore,
    events: list[Union[Call, Reward]],
    *,
    status: str = "succeeded",
    metadata: Optional[dict[str, Any]] = None,
    agent: Optional[str] = None,
) -> Rollout:
    """A rollout whose latest attempt recorded `events` one second apart (calls take 0.5 s), then ended with
    `status`. With `agent`, everything happens inside a span of that agent."""
    claimed = await store.start_rollout(input={"events": len(events)})
    rollout_id, attempt_id = claimed.rollout_id, claimed.attempt.attempt_id

    def make(
        index: int, name: str, start: float, end: float, attributes: dict[str, Any], parent: Optional[str]
    ) -> Span:
        return Span.from_attributes(
            attributes=attributes,
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=index,
            name=name,
            trace_id="a" * 32,
            span_id=f"{index:016x}",
            parent_id=parent,
            start_time=start,
            end_time=end,
        )

    parent: Optional[str] = None
    if agent is not None:
        parent = f"{len(events) + 1:016x}"
        await store.add_span(make(len(events) + 1, "agent", 0.0, len(events) + 1.0, {"agent.name": agent}, None))
    for index, event in enumerate(events, start=1):
        if event[0] == "call":
            _, prompt, response = event  # type: ignore[misc]
            attributes = {
                "prompt_token_ids": prompt,
                "response_token_ids": response,
                "gen_ai.response.id": f"{rollout_id}-{index}",
            }
            await store.add_span(make(index, "openai.chat.completion", index, index + 0.5, attributes, parent))
        else:
            await store.add_span(make(index, "agentlightning.reward", index, index, {"reward": event[1]}, parent))
    await store.update_attempt(rollout_id, attempt_id, status=status, metadata=metadata)  # type: ignore[arg-type]
    rollout = await store.get_rollout_by_id(rollout_id)
    assert rollout is not None and rollout.status == ("succeeded" if status == "succeeded" else "failed")
    return rollout
