"""An agent written with the Anthropic SDK is trained like any other: one GRPO step on the tiny model, through the
Trainer, runner processes, the LLM proxy's `/v1/messages` and the local inference server.

The tiny model is first taught (a few hundred steps of plain cross-entropy) to answer the question with a real
tool call, written compactly (`{"name":"add",...}`, no newlines), and the tool's result with the number. Rendering
that call back from the `tool_use` block the SDK returns gives other ids (the server writes calls in the Hermes
format, with spaces and newlines), so the two calls join into one sample only if the turn's exact ids come back
through the Messages translation (`agentlightning.inference.history`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("anthropic")

import agentlightning as agl
from agentlightning.adapter.trajectory import call_ids, stitch_calls
from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, read_rollouts
from agentlightning.inference.engine import InferenceEngine
from agentlightning.inference.tiny import build_tiny_engine
from agentlightning.types import Span
from agentlightning.utils.anthropic_messages import chat_request

from .agents import ADD_TOOL, add_question, anthropic_tool_agent

TASK = {"a": 2, "b": 3}
CALL = '<tool_call>{"name":"add","arguments":{"a":2,"b":3}}</tool_call>'
TAUGHT_CALL_ID = "call_taught"  # the id of the call in the conversation taught (never one the server makes)


def _prompts(engine: InferenceEngine, call_ids: list[int]) -> tuple[list[int], list[int]]:
    """The first call's prompt, and the second's after the model answered the first with `call_ids`."""
    question = [{"role": "user", "content": add_question(TASK)}]
    tool_use = {"type": "tool_use", "id": TAUGHT_CALL_ID, "name": "add", "input": {"a": 2, "b": 3}}
    answered = [
        *question,
        {"role": "assistant", "content": [tool_use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": TAUGHT_CALL_ID, "content": "5"}]},
    ]
    first = chat_request({"model": "tiny", "max_tokens": 80, "tools": [ADD_TOOL], "messages": question})
    first_prompt = engine.chat_prompt(first["messages"], first["tools"])
    second = chat_request({"model": "tiny", "max_tokens": 80, "tools": [ADD_TOOL], "messages": answered})
    rendered = engine.chat_prompt(second["messages"], second["tools"])
    conversation = first_prompt + call_ids
    assert rendered[: len(conversation)] != conversation  # the call rendered from its tool_use block differs
    engine.remember_turn(first_prompt, None, [TAUGHT_CALL_ID], call_ids)
    return first_prompt, engine.chat_prompt(second["messages"], second["tools"])


def _teach(engine: InferenceEngine) -> list[int]:
    """Fit the model to answer the first prompt with `CALL` and the second with "5"; the call's ids."""
    import torch

    call = [*engine.encode(CALL), int(engine.tokenizer.eos_token_id)]
    first, second = _prompts(engine, call)
    pairs = [(first, call), (second, [*engine.encode("5"), int(engine.tokenizer.eos_token_id)])]
    model = engine.model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs several times faster on one thread than on two busy ones
    try:
        for _ in range(400):
            loss = sum(
                model(input_ids=torch.tensor([p + a]), labels=torch.tensor([[-100] * len(p) + a])).loss
                for p, a in pairs
            )
            loss.backward()  # type: ignore[union-attr]
            optimizer.step()
            optimizer.zero_grad()
            if loss.item() < 0.01:  # type: ignore[union-attr]
                break
    finally:
        torch.set_num_threads(threads)
    model.eval()
    return call


async def _captured(store_url: str) -> tuple[list[RolloutData], dict[str, list[Span]]]:
    from agentlightning.store.url import store_from_url

    store = store_from_url(store_url)
    try:
        succeeded = await store.query_rollouts(status_in=["succeeded"])
        finished = [r for r in succeeded if r.input == TASK]  # not GRPO's own record of the run's health
        data = await read_rollouts(store, finished, None, agent_match=None)
        spans = {r.rollout_id: list(await store.query_spans(r.rollout_id)) for r in finished}
    finally:
        await store.close()
    return data, spans


def test_an_anthropic_sdk_agent_is_trained_on_its_tool_conversation_as_one_sample(tmp_path: Path) -> None:
    engine = build_tiny_engine(seed=0)
    call = _teach(engine)
    algorithm = GRPO(
        engine=engine,
        output_dir=tmp_path / "run",
        group_size=2,
        tasks_per_step=1,
        max_steps=1,
        temperature=0.2,  # the taught answers, sampled
        seed=0,
    )
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, strategy="cs", progress="off", store=store_url)
    trainer.fit(anthropic_tool_agent, [dict(TASK)])

    data, spans = asyncio.run(_captured(store_url))
    assert len(data) == 2 and all(len(item.calls) == 2 for item in data)
    for item in data:
        # every Messages call recorded by the proxy with its token ids: the tool_use, then the streamed final answer
        records = [
            s.attributes
            for s in spans[item.rollout.rollout_id]
            if s.attributes.get("agentlightning.llm.client_api") == "anthropic.messages"
        ]
        assert len(records) == 2 and all(r["prompt_token_ids"] and r["response_token_ids"] for r in records)
        assert [r.get("agentlightning.llm.stream", False) for r in records] == [False, True]
        sent_back = json.loads(str(records[1]["gen_ai.prompt.1.tool_calls"]))  # the tool_use block, returned
        assert sent_back[0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
        assert (records[1]["gen_ai.prompt.2.role"], records[1]["gen_ai.prompt.2.content"]) == ("tool", "5")
        assert records[1]["gen_ai.completion.0.content"] == "5"
        first, second = item.calls
        assert [int(t) for t in first.response["token_ids"]] == call  # a real tool_use, generated by the model
        conversation = [*first.prompt["token_ids"], *first.response["token_ids"]]
        assert list(second.prompt["token_ids"])[: len(conversation)] == conversation  # drift 0
        report = stitch_calls([call_ids(c) for c in item.calls])
        assert (report.lineages, report.drifted) == (1, 0)

    (step,) = algorithm.history
    assert step["samples"] == 2 and step["drift"]["drifted"] == 0  # one sample per rollout: its two calls
    assert step["skips"]["calls_other_sampling"] == 0  # the temperature passed in the request body was GRPO's
    assert engine.weights_version == "step-1"  # the step updated the model (the random rewards differ)
    for item in data:
        [sample] = [s for s in algorithm.last_samples if s.rollout_id == item.rollout.rollout_id]
        assert list(sample.prompt_ids) == list(item.calls[0].prompt["token_ids"])
        assert list(sample.response_ids[: len(call)]) == call  # the tool call's tokens, in the loss
        assert sample.loss_mask is not None and all(sample.loss_mask[: len(call)])
