"""Anthropic Messages <-> chat completions: requests, responses, streams and errors, checked with the Anthropic
SDK's own types and client where it matters."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentlightning.utils.anthropic_messages import (
    MessagesRequestError,
    MessagesStream,
    anthropic_error,
    chat_request,
    message_response,
)

TOOL = {"name": "capital_of", "description": "The capital of a country.", "input_schema": {"type": "object"}}


def test_a_two_turn_tool_conversation_becomes_the_chat_history_the_model_was_trained_on() -> None:
    request = {
        "model": "policy",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "Use the tool."}],
        "messages": [
            {"role": "user", "content": "Capital of Peru?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking it up."},
                    {"type": "tool_use", "id": "toolu_1", "name": "capital_of", "input": {"country": "Peru"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Lima"}]},
                    {"type": "text", "text": "Answer with the city."},
                ],
            },
        ],
        "tools": [TOOL],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "temperature": 0.7,
        "top_k": 20,
        "stop_sequences": ["\n\n"],
    }
    assert chat_request(request) == {
        "model": "policy",
        "max_tokens": 64,
        "messages": [
            {"role": "system", "content": "Use the tool."},
            {"role": "user", "content": "Capital of Peru?"},
            {
                "role": "assistant",
                "content": "Looking it up.",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": "capital_of", "arguments": '{"country": "Peru"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "Lima"},
            {"role": "user", "content": "Answer with the city."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "capital_of",
                    "parameters": {"type": "object"},
                    "description": "The capital of a country.",
                },
            }
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "temperature": 0.7,
        "top_k": 20,
        "stop": ["\n\n"],
    }


def test_a_tool_result_marked_as_an_error_says_so_and_a_turn_of_only_results_adds_no_empty_user_message() -> None:
    body = chat_request(
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}],
                },
            ],
        }
    )
    assert body["messages"][-2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "Error: boom"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_tokens": None}, "needs 'max_tokens'"),
        ({"messages": []}, "non-empty 'messages'"),
        ({"messages": [{"role": "system", "content": "x"}]}, "role must be 'user' or 'assistant'"),
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "image blocks are not"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "server tool"),
        ({"tool_choice": {"type": "sometimes"}}, "unsupported tool_choice"),
    ],
)
def test_what_cannot_be_served_is_refused_with_the_reason(change: dict[str, Any], message: str) -> None:
    request = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], **change}
    with pytest.raises(MessagesRequestError, match=message):
        chat_request(request)


def test_streaming_asks_the_model_for_usage_so_the_message_can_count_its_tokens() -> None:
    body = chat_request({"model": "m", "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


CHAT = {
    "id": "chatcmpl-1",
    "model": "policy",
    "prompt_token_ids": [1, 2, 3],
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "token_ids": [7, 8],
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "capital_of", "arguments": '{"country": "Peru"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


def test_a_chat_completion_becomes_a_message_the_anthropic_sdk_reads() -> None:
    anthropic = pytest.importorskip("anthropic")
    body = message_response(CHAT, "policy")
    message = anthropic.types.Message.model_validate(body)
    assert message.id == "msg_chatcmpl-1" and message.stop_reason == "tool_use"
    text, call = message.content
    assert text.type == "text" and text.text == "Let me check."
    assert call.type == "tool_use" and call.name == "capital_of" and call.input == {"country": "Peru"}
    assert (message.usage.input_tokens, message.usage.output_tokens) == (3, 2)
    assert body["prompt_token_ids"] == [1, 2, 3] and body["token_ids"] == [7, 8]


def test_a_length_stop_is_max_tokens_and_unparsable_tool_arguments_are_kept_raw() -> None:
    chat = {"choices": [{"finish_reason": "length", "message": {"content": None, "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": "{not json"}}]}}]}  # fmt: skip
    body = message_response(chat, "m")
    assert body["stop_reason"] == "max_tokens" and body["content"][0]["input"] == {"_raw": "{not json"}


def _chunks() -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "model": "policy"}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "Let me "}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "check."}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "capital_of", "arguments": ""}}]}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '{"country": '}}]}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '"Peru"}'}}]}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 9}},
    ]  # fmt: skip


def _stream_bytes() -> bytes:
    stream = MessagesStream("policy")
    events: list[bytes] = []
    for chunk in _chunks():
        events += stream.feed(chunk)
    return b"".join([*events, *stream.finish()])


def test_a_chat_stream_becomes_anthropic_events_in_order() -> None:
    kinds = [line[7:] for line in _stream_bytes().decode().splitlines() if line.startswith("event: ")]
    assert kinds == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip


def test_the_anthropic_sdk_assembles_the_translated_stream_into_the_whole_message() -> None:
    anthropic = pytest.importorskip("anthropic")
    try:
        import httpx2 as httpx  # the HTTP library of the SDK's 2.x releases
    except ImportError:
        import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/messages"
        return httpx.Response(200, content=_stream_bytes(), headers={"content-type": "text/event-stream"})

    client = anthropic.Anthropic(
        base_url="http://agl.test", api_key="k", http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    with client.messages.stream(
        model="policy", max_tokens=32, messages=[{"role": "user", "content": "Capital of Peru?"}]
    ) as stream:
        message = stream.get_final_message()
    text, call = message.content
    assert text.text == "Let me check."  # type: ignore[union-attr]
    assert call.type == "tool_use" and call.input == {"country": "Peru"} and call.id == "call_1"
    assert message.stop_reason == "tool_use" and message.usage.output_tokens == 9


def test_errors_take_anthropics_shape_with_the_type_for_the_status() -> None:
    assert anthropic_error(404, "no such model") == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "no such model"},
    }
    assert anthropic_error(503, "x")["error"]["type"] == "api_error"
    event = MessagesStream.error(502, "upstream died").decode()
    assert (
        event.startswith("event: error\n") and json.loads(event.split("data: ", 1)[1])["error"]["type"] == "api_error"
    )
