"""A conversation's next prompt extends the previous prompt + response ids exactly when the earlier turn was
generated here, even where re-rendering the turn from its message would give other ids (history.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

import httpx

from agentlightning.inference.history import GeneratedTurns
from agentlightning.inference.server import InferenceServer

from .scripted import scripted_engine

TOOL = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}
# Compact JSON without the newlines the Hermes format writes back: re-rendering the call gives other ids.
CALL = '<tool_call>{"name":"multiply","arguments":{"a":6,"b":7}}</tool_call>'


def reply(prompt: str) -> str:
    if "<tool_response>" in prompt:
        return "42"
    if "multiply" in prompt:
        return CALL
    return "Hi<pad>there"  # a special token inside the answer: the text sent back has no trace of it


@pytest.fixture(scope="module")
def server() -> Iterator[InferenceServer]:
    with InferenceServer(scripted_engine(reply)) as running:
        yield running


def _post(server: InferenceServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{server.endpoint}{path}", json={"model": "scripted", **body}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def _chat(server: InferenceServer, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return _post(server, "/chat/completions", {"messages": messages, "return_token_ids": True, **extra})


def _streamed_chat(server: InferenceServer, messages: list[dict[str, Any]], tools: list[Any]) -> dict[str, Any]:
    """The message, prompt ids and token ids assembled from a streamed answer."""
    body = {"model": "scripted", "messages": messages, "tools": tools, "return_token_ids": True, "stream": True}
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    prompt_ids: list[int] = []
    token_ids: list[int] = []
    with httpx.stream("POST", f"{server.endpoint}/chat/completions", json=body, timeout=60) as response:
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            prompt_ids = chunk.get("prompt_token_ids") or prompt_ids
            for choice in chunk["choices"]:
                token_ids.extend(choice.get("token_ids") or [])
                delta = choice.get("delta") or {}
                message["content"] += delta.get("content") or ""
                if delta.get("tool_calls"):
                    message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in delta["tool_calls"]]
    return {"message": message, "prompt_ids": prompt_ids, "token_ids": token_ids}


def _extends(later: list[int], earlier: list[int]) -> bool:
    return later[: len(earlier)] == earlier


def test_the_prompt_after_a_tool_call_extends_the_prompt_and_the_generated_ids(server: InferenceServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is 6 * 7?"}]
    first = _chat(server, messages, tools=[TOOL])
    message = first["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "multiply"
    history = [*messages, message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"}]
    second = _chat(server, history, tools=[TOOL])
    assert _extends(second["prompt_token_ids"], first["prompt_token_ids"] + first["choices"][0]["token_ids"])
    assert second["choices"][0]["message"]["content"] == "42"


def test_a_text_answer_comes_back_as_the_ids_it_was_generated_with(server: InferenceServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Hello"}]
    first = _chat(server, messages)
    assert first["choices"][0]["message"]["content"] == "Hithere"
    second = _chat(server, [*messages, first["choices"][0]["message"], {"role": "user", "content": "Again"}])
    assert _extends(second["prompt_token_ids"], first["prompt_token_ids"] + first["choices"][0]["token_ids"])


def test_a_streamed_tool_call_comes_back_exactly(server: InferenceServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is 6 * 7?"}]
    first = _streamed_chat(server, messages, [TOOL])
    call_id = first["message"]["tool_calls"][0]["id"]
    history = [*messages, first["message"], {"role": "tool", "tool_call_id": call_id, "content": "42"}]
    second = _chat(server, history, tools=[TOOL])
    assert _extends(second["prompt_token_ids"], first["prompt_ids"] + first["token_ids"])


def test_an_edited_history_is_rendered_from_its_messages(server: InferenceServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is 6 * 7?"}]
    first = _chat(server, messages, tools=[TOOL])
    message = first["choices"][0]["message"]
    edited = [{"role": "user", "content": "What is 6 times 7?"}]  # the turn no longer follows its prompt
    history = [*edited, message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"}]
    second = _chat(server, history, tools=[TOOL])
    expected = server.engine._encode_text(server.engine._render(history, [TOOL]))
    assert second["prompt_token_ids"] == expected


def test_responses_api_turns_come_back_exactly(server: InferenceServer) -> None:
    tools = [{"type": "function", **TOOL["function"]}]
    first = _post(server, "/responses", {"input": "What is 6 * 7?", "tools": tools, "return_token_ids": True})
    (call,) = [item for item in first["output"] if item["type"] == "function_call"]
    history = [
        {"role": "user", "content": "What is 6 * 7?"},
        *first["output"],
        {"type": "function_call_output", "call_id": call["call_id"], "output": "42"},
    ]
    second = _post(server, "/responses", {"input": history, "tools": tools, "return_token_ids": True})
    assert _extends(second["prompt_token_ids"], first["prompt_token_ids"] + first["output_token_ids"])
    assert second["status"] == "completed"


# ------------------------------------------------------------------------------------------ the memory itself
def test_generated_turns_are_found_only_after_the_prompt_they_answered() -> None:
    turns = GeneratedTurns()
    turns.remember([1, 2], None, ["call_a"], [7, 8])
    assert turns.lookup([1, 2], {"role": "assistant", "tool_calls": [{"id": "call_a"}]}) == [7, 8]
    assert turns.lookup([1, 3], {"role": "assistant", "tool_calls": [{"id": "call_a"}]}) is None
    assert turns.lookup([1, 2], {"role": "assistant", "content": "other"}) is None


def test_generated_turns_forget_the_oldest_beyond_their_capacity() -> None:
    turns = GeneratedTurns(capacity=2)
    for index in range(3):
        turns.remember([index], f"answer {index}", [], [index])
    assert len(turns) == 2
    assert not turns.knows({"content": "answer 0"})
    assert turns.knows({"content": "answer 2"})
