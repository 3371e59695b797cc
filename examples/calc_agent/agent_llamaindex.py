"""The calculator agent written with LlamaIndex (`FunctionAgent` with two tools), its model reached through
LlamaIndex's LiteLLM integration (`llama-index-llms-litellm`: LlamaIndex's OpenAI package requires openai<3, see
docs/capture.md). The reward line is its only training-specific line."""

from __future__ import annotations

from typing import Any, Optional

from task import MAX_TURNS, SYSTEM_PROMPT, examples_for, max_tokens, question, reward
from task import add as add_numbers
from task import multiply as multiply_numbers

import agentlightning as agl


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return multiply_numbers(a, b)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return add_numbers(a, b)


def worked_examples(task: Optional[dict[str, Any]] = None) -> list[Any]:
    """The worked examples as LlamaIndex chat messages: question, tool call, its result, answer."""
    from llama_index.core.llms import ChatMessage

    messages: list[Any] = []
    for index, example in enumerate(examples_for(task)):
        call_id = f"example_{index}"
        call = {"id": call_id, "type": "function", "function": {"name": example.tool, "arguments": example.arguments}}
        messages += [
            ChatMessage(role="user", content=example.question),
            ChatMessage(role="assistant", content=None, additional_kwargs={"tool_calls": [call]}),
            ChatMessage(role="tool", content=example.result, additional_kwargs={"tool_call_id": call_id}),
            ChatMessage(role="assistant", content=example.result),
        ]
    return messages


@agl.rollout
async def calc_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    import litellm
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.llms.litellm import LiteLLM
    from workflows.errors import WorkflowRuntimeError

    name = f"openai/{llm.model}"  # LiteLLM's OpenAI provider: any OpenAI-compatible endpoint
    # LiteLLM knows which models call tools from its own table; a served model must be declared (else FunctionAgent
    # refuses the LLM: "LLM must be a FunctionCallingLLM").
    litellm.register_model({name: {"supports_function_calling": True, "litellm_provider": "openai", "mode": "chat"}})
    model = LiteLLM(
        model=name,
        api_base=llm.endpoint,
        api_key=llm.api_key or "unused",
        temperature=llm.sampling_parameters.get("temperature", 0.0),
        max_tokens=max_tokens(llm.sampling_parameters),
    )
    agent = FunctionAgent(
        name="calculator",
        tools=[multiply, add],
        llm=model,
        system_prompt=SYSTEM_PROMPT,
        streaming=False,
    )
    try:
        result = await agent.run(user_msg=question(task), chat_history=worked_examples(task), max_iterations=MAX_TURNS)
        reply = str(result.response.content or "")
    except WorkflowRuntimeError:
        reply = ""  # still calling tools after MAX_TURNS calls: no answer
    return reward(reply, task)  # the reward: the only training-specific line
