"""Tool calls parsed from the model's output (plain and streamed) and the Responses API, with real clients.

The model is scripted (tests/inference/scripted.py) so that it answers with tool calls; the engine, batching,
prompt rendering, parsing and server are the real ones.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

import httpx

from agentlightning.inference.server import InferenceServer
from agentlightning.inference.tiny import build_tiny_engine
from agentlightning.inference.tools import ParsedToolCall, ToolCallParser, fallback_messages

from .scripted import WEATHER_CALL, WEATHER_PARAMETERS, scripted_engine, weather_reply

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": WEATHER_PARAMETERS,
    },
}
CALL = WEATHER_CALL
reply = weather_reply  # call the weather tool when it is offered, then answer with what it returned


@pytest.fixture(scope="module")
def server() -> Iterator[InferenceServer]:
    with InferenceServer(scripted_engine(reply)) as running:
        yield running


def chat(server: InferenceServer, **body: Any) -> dict[str, Any]:
    payload = {"model": "scripted", "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 300,
               **body}  # fmt: skip
    response = httpx.post(f"{server.endpoint}/chat/completions", json=payload, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


# ----------------------------------------------------------------------------------------------------- parsing
def test_a_tool_call_block_becomes_a_call_and_the_text_before_it_content() -> None:
    content, calls = ToolCallParser().parse("Let me check.\n" + CALL)
    assert content == "Let me check."
    assert calls == [ParsedToolCall("get_weather", '{"city": "Paris"}')]


def test_a_list_in_one_block_and_several_blocks_give_several_calls() -> None:
    listed = '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]</tool_call>'
    blocks = '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "parameters": {"x": 1}}'
    for text in (listed, blocks):
        assert [(c.name, json.loads(c.arguments)) for c in ToolCallParser().parse(text)[1]] == [
            ("a", {}),
            ("b", {"x": 1}),
        ]


@pytest.mark.parametrize(
    "text",
    ['<tool_call>{"name": "a", "arguments": </tool_call>', '<tool_call>{"arguments": {}}</tool_call>', "no call"],
)
def test_text_that_is_not_a_valid_call_stays_content(text: str) -> None:
    assert ToolCallParser().parse(text) == (text, [])


def test_streaming_holds_back_a_call_and_the_start_of_its_tag() -> None:
    parser = ToolCallParser()
    assert parser.visible_length("Let me <tool", finished=False) == len("Let me")
    assert parser.visible_length("Let me check.\n<tool_call>\n{", finished=False) == len("Let me check.")
    assert parser.visible_length("Let me check.\n", finished=False) == len("Let me check.")
    assert parser.visible_length("Let me check.\n" + CALL, finished=True) == len("Let me check.")
    assert parser.visible_length("a < b", finished=False) == len("a < b")


def test_llama3_json_calls_are_parsed_when_the_template_uses_them() -> None:
    parser = ToolCallParser("llama3_json")
    assert parser.parse('{"name": "get_weather", "parameters": {"city": "Paris"}}')[1] == [
        ParsedToolCall("get_weather", '{"city": "Paris"}')
    ]
    assert parser.parse("It is sunny.") == ("It is sunny.", [])


def test_a_template_that_ignores_tools_gets_them_in_a_system_message() -> None:
    engine = build_tiny_engine()
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]  # fmt: skip
    text = engine.tokenizer.decode(engine.chat_prompt(messages, [WEATHER_TOOL]))
    assert text.startswith("<|im_start|>system\n") and '"name": "get_weather"' in text.split("<|im_end|>")[0]
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<tool_response>\nsunny\n</tool_response>" in text
    assert fallback_messages([{"role": "user", "content": "x"}], None) == [{"role": "user", "content": "x"}]


# ------------------------------------------------------------------------------------------ chat completions
def test_chat_completions_return_parsed_tool_calls(server: InferenceServer) -> None:
    body = chat(server, tools=[WEATHER_TOOL])
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me check."
    [call] = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_without_tools_offered_the_text_is_left_alone(server: InferenceServer) -> None:
    body = chat(server, tools=[WEATHER_TOOL], tool_choice="none")
    assert "tool_calls" not in body["choices"][0]["message"]
    assert body["choices"][0]["finish_reason"] == "stop"


def test_streamed_tool_calls_match_the_plain_answer(server: InferenceServer) -> None:
    payload = {"model": "scripted", "messages": [{"role": "user", "content": "Weather in Paris?"}],
               "max_tokens": 300, "tools": [WEATHER_TOOL], "stream": True, "return_token_ids": True}  # fmt: skip
    with httpx.stream("POST", f"{server.endpoint}/chat/completions", json=payload, timeout=60) as response:
        chunks = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    calls = [call for c in chunks for choice in c["choices"] for call in choice["delta"].get("tool_calls", [])]
    assert content == "Let me check." and "<tool_call>" not in content
    assert [(call["index"], call["function"]["name"], call["function"]["arguments"]) for call in calls] == [
        (0, "get_weather", '{"city": "Paris"}')
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    plain = chat(server, tools=[WEATHER_TOOL], return_token_ids=True)
    streamed_ids = [t for c in chunks for choice in c["choices"] for t in choice.get("token_ids", [])]
    assert streamed_ids == plain["choices"][0]["token_ids"]


def test_the_openai_sdk_reads_the_tool_calls(server: InferenceServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.endpoint, api_key="unused")
    messages: Any = [{"role": "user", "content": "Weather in Paris?"}]
    reply_ = client.chat.completions.create(model="scripted", messages=messages, tools=[WEATHER_TOOL])  # type: ignore[list-item]
    call = reply_.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------- responses API
def test_responses_answer_text(server: InferenceServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.endpoint, api_key="unused")
    response = client.responses.create(model="scripted", input="Say hi", max_output_tokens=50)
    assert response.output_text == "Hello there!" and response.status == "completed"
    assert response.usage is not None and response.usage.output_tokens == len("Hello there!") + 1


def test_responses_return_function_calls_and_take_their_outputs(server: InferenceServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.endpoint, api_key="unused")
    tool: Any = {"type": "function", **WEATHER_TOOL["function"]}
    first = client.responses.create(model="scripted", input="Weather in Paris?", tools=[tool])
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    follow_up: Any = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"},
    ]
    second = client.responses.create(model="scripted", input=follow_up, tools=[tool])
    assert second.output_text == "The weather in Paris: sunny, 21 C."


def test_streamed_responses_carry_the_same_output(server: InferenceServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.endpoint, api_key="unused")
    tool: Any = {"type": "function", **WEATHER_TOOL["function"]}
    with client.responses.stream(model="scripted", input="Weather in Paris?", tools=[tool]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds and "response.function_call_arguments.done" in kinds
    assert final.output_text == "Let me check."
    assert [(i.name, i.arguments) for i in final.output if i.type == "function_call"] == [
        ("get_weather", '{"city": "Paris"}')
    ]


@pytest.mark.parametrize(
    "body, message",
    [
        ({"tools": [{"type": "web_search"}]}, "only function tools"),
        ({"previous_response_id": "resp_1"}, "stateless"),
        ({"input": [{"type": "image_generation_call"}]}, "unsupported item type"),
    ],
)
def test_unsupported_responses_requests_get_a_400_naming_the_problem(
    server: InferenceServer, body: dict[str, Any], message: str
) -> None:
    payload = {"model": "scripted", "input": "hi", **body}
    response = httpx.post(f"{server.endpoint}/responses", json=payload, timeout=60)
    assert response.status_code == 400 and message in response.json()["error"]["message"]


# ----------------------------------------------------------------------------------------- agent frameworks
def test_an_openai_agents_sdk_agent_calls_its_tool_through_the_server(server: InferenceServer) -> None:
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    no_tracing = agents.RunConfig(tracing_disabled=True)  # per run: the global switch would outlive this test
    calls: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        calls.append(city)
        return "sunny"

    model = agents.OpenAIResponsesModel(
        model="scripted", openai_client=AsyncOpenAI(base_url=server.endpoint, api_key="unused")
    )
    agent = agents.Agent(name="weather", instructions="Answer about the weather.", tools=[get_weather], model=model)

    async def run() -> tuple[str, str]:
        plain = await agents.Runner.run(agent, "Weather in Paris?", run_config=no_tracing)
        streamed = agents.Runner.run_streamed(agent, "Weather in Paris?", run_config=no_tracing)
        async for _ in streamed.stream_events():
            pass
        return str(plain.final_output), str(streamed.final_output)

    plain, streamed = asyncio.run(run())
    assert calls == ["Paris", "Paris"]
    assert plain == streamed == "The weather in Paris: sunny."


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
@pytest.mark.parametrize("streaming", [False, True])
def test_a_langchain_tool_agent_calls_its_tool_through_the_server(server: InferenceServer, streaming: bool) -> None:
    pytest.importorskip("langchain_openai")
    prebuilt = pytest.importorskip("langgraph.prebuilt")
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    calls: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        calls.append(city)
        return "rainy"

    llm = ChatOpenAI(model="scripted", base_url=server.endpoint, api_key="unused", streaming=streaming)  # type: ignore[arg-type]
    agent = prebuilt.create_react_agent(llm, [get_weather])
    result = agent.invoke({"messages": [("user", "Weather in Paris?")]})
    assert calls == ["Paris"]
    assert result["messages"][-1].content == "The weather in Paris: rainy."
