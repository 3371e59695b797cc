"""An agent whose history is not append-only: it hands a sub-question to a sub-agent with a fresh conversation, and
after every `COMPACT_EVERY` turns of its own conversation it asks the model to summarise that conversation, then
continues from the system prompt, the question and that summary.

The task: "What is a times b, plus c?" (a and b one-digit, c two-digit). A helper (the sub-agent) is asked "What is a
times b?" in a conversation of its own, with the `multiply` tool; the main conversation gets its answer and has the
`add` tool. After the main conversation's first turn (normally the `add` call) the model summarises it, and the
conversation resumed from the summary must reply with the number. A reply that is neither a tool call nor just a
number gets a reminder and another turn, up to `MAX_TURNS`. The reward is the outcome: 1.0 when the final reply is
exactly the number, else 0.0, so the summary earns it only when it carries the number found.

Each conversation starts with one worked example as real turns (question, tool call, its result, answer; for the
resumed conversation: question with notes, answer), which is what makes SmolLM2-135M produce tool calls in the format
the server parses at all (docs/train-your-agent.md, "Getting a small model to call tools").

For training (docs/algorithms.md, "Multi-turn samples") a rollout's calls form three lineages: the helper's
conversation, the main conversation up to and including the summary call (the summary is the model's own tokens,
trained with the outcome), and the conversation resumed from the summary.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any, Union

import agentlightning as agl

MAIN_SYSTEM = "Use the tools to compute the answer step by step, then reply with just the number."
HELPER_SYSTEM = "Use the multiply tool, then reply with just the number."
SUMMARISE = "Summarise the conversation so far in one sentence: the question and the numbers found."
REMINDER = "Call a tool, or reply with just the number."
MAX_TURNS = 3  # main-conversation calls at most (summary calls not counted)
COMPACT_EVERY = 1  # main-conversation calls between two summaries
MAX_HELPER_TURNS = 2
MAX_TOKENS = 64  # per call (a tool call takes about 25 tokens of SmolLM2's vocabulary)
SUMMARY_TOKENS = 64
MAX_HELPER_REPLY = 200  # characters of the helper's reply passed on

# The worked examples every conversation starts with (the helper's part is the product, the main conversation's
# the sum), and the notes a summary of each would hold.
EXAMPLE_TASKS = [{"a": 6, "b": 4, "c": 17}, {"a": 3, "b": 9, "c": 25}]


def example_notes(task: dict[str, Any]) -> str:
    product = int(task["a"]) * int(task["b"])
    return (
        f"The question is what {task['a']} times {task['b']} plus {task['c']} is. The helper found {product}, and "
        f"adding {task['c']} gave {answer_of(task)}."
    )


def _multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


HELPER_TOOLS: dict[str, Callable[[int, int], int]] = {"multiply": _multiply}
MAIN_TOOLS: dict[str, Callable[[int, int], int]] = {"add": _add}


def run_tool(tools: dict[str, Callable[[int, int], int]], name: str, arguments: Union[str, dict[str, Any]]) -> str:
    """A tool's result as the text the model reads; a bad call gets an error message (never an exception)."""
    tool = tools.get(name)
    if tool is None:
        return f"error: unknown tool {name!r}; the tools are {sorted(tools)}"
    try:
        values = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        return str(tool(int(values["a"]), int(values["b"])))
    except Exception as exc:  # whatever the model passed: it reads why the call failed
        return f"error: {name} needs integer arguments a and b ({type(exc).__name__})"


def tool_schemas(tools: dict[str, Callable[[int, int], int]]) -> list[dict[str, Any]]:
    """`tools` in the OpenAI chat format."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": (tool.__doc__ or "").strip(),
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
            },
        }
        for name, tool in tools.items()
    ]


def question(task: dict[str, Any]) -> str:
    return f"What is {task['a']} times {task['b']}, plus {task['c']}?"


def helper_question(task: dict[str, Any]) -> str:
    return f"What is {task['a']} times {task['b']}?"


def answer_of(task: dict[str, Any]) -> int:
    return int(task["a"]) * int(task["b"]) + int(task["c"])


def is_number(reply: str) -> bool:
    return re.fullmatch(r"\s*-?\d+\s*\.?\s*", reply) is not None


def reward(reply: str, task: dict[str, Any]) -> float:
    """The outcome: 1.0 when the reply is exactly the answer (surrounding spaces and a final period allowed)."""
    return 1.0 if is_number(reply) and int(reply.strip().rstrip(".")) == answer_of(task) else 0.0


def make_tasks(count: int, seed: int) -> list[dict[str, int]]:
    """`count` distinct tasks (at most 1,280 exist): a and b from 2 to 9, c from 10 to 49, never the worked
    example's numbers."""
    rng = random.Random(seed)
    tasks: dict[tuple[int, int, int], dict[str, int]] = {}
    while len(tasks) < count:
        task = {"a": rng.randint(2, 9), "b": rng.randint(2, 9), "c": rng.randint(10, 49)}
        if task not in EXAMPLE_TASKS:
            tasks[(task["a"], task["b"], task["c"])] = task
    return list(tasks.values())


def _worked_call(index: int, name: str, a: int, b: int) -> list[dict[str, Any]]:
    """A worked example's tool call and its result."""
    call_id = f"example_{index}"
    arguments = json.dumps({"a": a, "b": b})
    result = run_tool(HELPER_TOOLS if name == "multiply" else MAIN_TOOLS, name, arguments)
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]  # fmt: skip


def helper_messages(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The sub-agent's conversation: its system prompt, the worked examples, the sub-question."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": HELPER_SYSTEM}]
    for index, example in enumerate(EXAMPLE_TASKS):
        messages.append({"role": "user", "content": helper_question(example)})
        messages += _worked_call(index, "multiply", example["a"], example["b"])
        messages.append({"role": "assistant", "content": str(int(example["a"]) * int(example["b"]))})
    return [*messages, {"role": "user", "content": helper_question(task)}]


def main_question(task: dict[str, Any], helped: str) -> str:
    return f"{question(task)}\nA helper computed {task['a']} times {task['b']}: {helped}"


def main_messages(task: dict[str, Any], helped: str) -> list[dict[str, Any]]:
    """The main conversation: its system prompt, the worked examples (the question, the `add` call, its result, the
    summary asked for and given: what a rollout's main conversation is up to its compaction), the question with the
    helper's answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": MAIN_SYSTEM}]
    for index, example in enumerate(EXAMPLE_TASKS):
        product = int(example["a"]) * int(example["b"])
        messages.append({"role": "user", "content": main_question(example, str(product))})
        messages += _worked_call(index, "add", product, example["c"])
        messages += [{"role": "user", "content": SUMMARISE}, {"role": "assistant", "content": example_notes(example)}]
    return [*messages, {"role": "user", "content": main_question(task, helped)}]


def resumed_messages(task: dict[str, Any], notes: str) -> list[dict[str, Any]]:
    """The conversation resumed from a summary: the system prompt, the worked examples (question with notes,
    answer), the question with the notes."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": MAIN_SYSTEM}]
    for example in EXAMPLE_TASKS:
        messages += [
            {"role": "user", "content": f"{question(example)}\nYour notes so far: {example_notes(example)}"},
            {"role": "assistant", "content": str(answer_of(example))},
        ]
    return [*messages, {"role": "user", "content": f"{question(task)}\nYour notes so far: {notes}"}]


class _Model:
    """The calls of one rollout to the published model."""

    def __init__(self, llm: agl.LLM) -> None:
        from openai import AsyncOpenAI

        self.llm = llm
        self.client = AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=2)
        self.max_tokens = int(llm.sampling_parameters.get("max_tokens", MAX_TOKENS))
        self.temperature = llm.sampling_parameters.get("temperature", 0.0)

    async def call(self, messages: list[Any], tools: dict[str, Callable[[int, int], int]], max_tokens: int) -> Any:
        completion = await self.client.chat.completions.create(
            model=self.llm.model,
            messages=messages,
            tools=tool_schemas(tools),  # type: ignore[arg-type]
            max_tokens=max_tokens,
            temperature=self.temperature,
        )
        return completion.choices[0].message

    async def tool_turn(self, messages: list[Any], tools: dict[str, Callable[[int, int], int]]) -> Any:
        """One call; its reply is appended to `messages`, and so are the results of the tools it called."""
        message = await self.call(messages, tools, self.max_tokens)
        if message.tool_calls:
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = run_tool(tools, call.function.name, call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return message


async def ask_helper(model: _Model, task: dict[str, Any]) -> str:
    """The sub-agent: a fresh conversation of its own, with the multiply tool. Its final reply (cut short)."""
    messages: list[Any] = helper_messages(task)
    reply = ""
    for _ in range(MAX_HELPER_TURNS):
        message = await model.tool_turn(messages, HELPER_TOOLS)
        if not message.tool_calls:
            reply = message.content or ""
            break
    return reply.strip()[:MAX_HELPER_REPLY]


async def compact(model: _Model, messages: list[Any], task: dict[str, Any]) -> list[Any]:
    """Ask the model to summarise `messages`, and the conversation to continue from (`resumed_messages`: a prompt
    of its own, so it roots a new lineage)."""
    # the same tools as the conversation's calls: the chat template renders them into the system turn, so the
    # summary call's prompt extends the conversation's ids only with them
    summary = await model.call([*messages, {"role": "user", "content": SUMMARISE}], MAIN_TOOLS, SUMMARY_TOKENS)
    return resumed_messages(task, (summary.content or "").strip())


@agl.rollout
async def compacting_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    model = _Model(llm)
    helped = await ask_helper(model, task)
    messages: list[Any] = main_messages(task, helped)
    reply = ""
    for turn in range(MAX_TURNS):
        if turn and turn % COMPACT_EVERY == 0:
            messages = await compact(model, messages, task)
        message = await model.tool_turn(messages, MAIN_TOOLS)
        if message.tool_calls:
            reply = ""  # a rollout that ends on a tool call has not answered
            continue
        reply = message.content or ""
        if is_number(reply):
            break
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": REMINDER}]
    return reward(reply, task)
