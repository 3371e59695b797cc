"""The calculator task shared by the four versions of the agent: questions, tools, worked examples, reward.

A question is "What is a * b + c?" with two-digit a, b, c: beyond what SmolLM2-135M computes in its head, so the
agent must call its tools twice (multiply a and b, then add c to the product) and answer with the number. A rollout
is three LLM calls with two tool results between them when it goes right.

Tools: `multiply(a, b)` and `add(a, b)` over integers. The agent's prompt holds two worked examples as real turns of
the conversation (a tool call, its result, the answer), which is what makes the small model produce calls in the
format the server parses at all; neither example chains two calls, which is what the model must learn.

Split: the held-out questions share no multiplication (unordered pair {a, b}) with the training questions, so no
held-out item is a training item with its factors swapped or only its addend changed.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Union

SYSTEM_PROMPT = "Use the tools to compute the answer, then reply with just the number."
MAX_TURNS = 4  # LLM calls per rollout at most: two tool calls and the answer, plus one to spare
MAX_TOKENS = 64  # per LLM call (a tool call takes about 25 tokens of SmolLM2's vocabulary)


def max_tokens(sampling_parameters: dict[str, Any]) -> int:
    """Tokens per call: the resource's `max_tokens` when it sets one (tests with a character-level model)."""
    return int(sampling_parameters.get("max_tokens", MAX_TOKENS))


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return int(a) * int(b)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return int(a) + int(b)


TOOLS = {"multiply": multiply, "add": add}


def run_tool(name: str, arguments: Union[str, dict[str, Any]]) -> str:
    """A tool's result as the text the model reads; bad calls get an error message instead (never an exception)."""
    tool = TOOLS.get(name)
    if tool is None:
        return f"error: unknown tool {name!r}; the tools are {sorted(TOOLS)}"
    try:
        values = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        return str(tool(int(values["a"]), int(values["b"])))
    except (ValueError, TypeError, KeyError) as exc:
        return f"error: {name} needs integer arguments a and b ({type(exc).__name__}: {exc})"


def openai_tool_schemas() -> list[dict[str, Any]]:
    """The tools in the OpenAI chat format (the plain-SDK agent's `tools=`)."""
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
        for name, tool in TOOLS.items()
    ]


@dataclass(frozen=True)
class WorkedExample:
    """One worked example: the question, the one tool call it takes, its result and the answer."""

    question: str
    tool: str
    a: int
    b: int

    @property
    def result(self) -> str:
        return run_tool(self.tool, {"a": self.a, "b": self.b})

    @property
    def arguments(self) -> str:
        return json.dumps({"a": self.a, "b": self.b})


EXAMPLES = [WorkedExample("What is 23 * 41?", "multiply", 23, 41), WorkedExample("What is 357 + 218?", "add", 357, 218)]


def question(task: dict[str, Any]) -> str:
    return f"What is {task['a']} * {task['b']} + {task['c']}?"


def answer_of(task: dict[str, Any]) -> int:
    return int(task["a"]) * int(task["b"]) + int(task["c"])


def strict_correct(reply: str, task: dict[str, Any]) -> bool:
    """The reply is exactly the number (surrounding spaces and a final period allowed)."""
    return reply.strip().rstrip(".").strip() == str(answer_of(task))


def lenient_correct(reply: str, task: dict[str, Any]) -> bool:
    """Some integer in the reply is the answer."""
    return str(answer_of(task)) in re.findall(r"-?\d+", reply)


def reward(reply: str, task: dict[str, Any]) -> float:
    """1 when the reply is exactly the answer, else 0."""
    return 1.0 if strict_correct(reply, task) else 0.0


def split_tasks(
    n_train: int = 200, n_held_out: int = 50, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Training and held-out tasks with two-digit a, b, c; the two sets share no unordered pair {a, b}."""
    rng = random.Random(seed)
    pairs = sorted({(a, b) for a in range(10, 100) for b in range(a, 100)})
    rng.shuffle(pairs)
    held_pairs, train_pairs = pairs[:n_held_out], pairs[n_held_out : n_held_out + n_train]

    def tasks(chosen: list[tuple[int, int]]) -> list[dict[str, Any]]:
        result = []
        for low, high in chosen:
            a, b = (low, high) if rng.random() < 0.5 else (high, low)
            result.append({"a": a, "b": b, "c": rng.randint(10, 99)})
        return result

    return tasks(train_pairs), tasks(held_pairs)
