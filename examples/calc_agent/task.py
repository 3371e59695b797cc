"""The calculator task shared by the four versions of the agent: word problems, tools, worked examples, reward.

A question is a short word problem whose answer is a product of two two-digit numbers ("A box holds 40 rows of 85
eggs. How many eggs are in the box?") or a sum of two three-digit numbers: beyond what SmolLM2-135M computes in its
head, so the agent must pick the right tool, call it with the right numbers, and answer with its result. A rollout
that goes right is two LLM calls with the tool's result between them.

Tools: `multiply(a, b)` and `add(a, b)` over integers. The agent's prompt holds two worked examples as real turns of
the conversation (a tool call, its result, the answer), which is what makes the small model produce calls in the
format the server parses at all. The untrained model mostly adds, whatever the question says (the last worked
example adds): choosing the tool from the wording is what it must learn.

Split: the held-out questions share no pair of numbers {a, b} with the training questions (for either operation), so
no held-out item is a training item with its numbers swapped or only its wording changed; both sets use the same
wordings.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Optional, Union

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
    except Exception as exc:  # whatever the model passed (1e999 overflows int()): the model reads why
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


EXAMPLES = [
    WorkedExample("A farm has 23 pens with 41 sheep in each pen. How many sheep are there?", "multiply", 23, 41),
    WorkedExample("A school has 357 girls and 218 boys. How many pupils does it have?", "add", 357, 218),
]

EXAMPLE_ORDERS = {"multiply-first": ("multiply", "add"), "add-first": ("add", "multiply")}
"""Orders of the worked examples a task may ask for (`task["example_order"]`; absent: `EXAMPLES` as listed, the
adding example last). The untrained model mostly calls the last example's tool whatever the question says."""


def examples_for(task: Optional[dict[str, Any]] = None) -> list[WorkedExample]:
    """The worked examples in the order `task` asks for (see `EXAMPLE_ORDERS`; no task or no order: `EXAMPLES`)."""
    order = (task or {}).get("example_order")
    if order is None:
        return list(EXAMPLES)
    if order not in EXAMPLE_ORDERS:
        raise ValueError(f"example_order must be one of {sorted(EXAMPLE_ORDERS)}, got {order!r}")
    by_tool = {example.tool: example for example in EXAMPLES}
    return [by_tool[tool] for tool in EXAMPLE_ORDERS[order]]


def mix_example_orders(tasks: list[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """`tasks` with an `example_order` each: within each operation, half the tasks see the multiplying example last
    and half the adding one (a seeded shuffle decides which), so the last example's tool does not decide every
    question's. Returns new dicts; `tasks` is left as it is."""
    rng = random.Random(seed)
    mixed = [dict(task) for task in tasks]
    for op in OPERAND_RANGES:
        positions = [i for i, task in enumerate(mixed) if task["op"] == op]
        orders = [sorted(EXAMPLE_ORDERS)[i % 2] for i in range(len(positions))]
        rng.shuffle(orders)
        for position, order in zip(positions, orders, strict=True):
            mixed[position]["example_order"] = order
    return mixed


WORDINGS = {
    "multiply": [
        "A box holds {a} rows of {b} eggs. How many eggs are in the box?",
        "Each of {a} buses carries {b} people. How many people ride the buses?",
        "A garden has {a} rows with {b} plants in each row. How many plants are there?",
        "What is {a} times {b}?",
        "How much do {a} tickets cost at {b} dollars each?",
        "A book has {a} pages with {b} words on each page. How many words does it have?",
    ],
    "add": [
        "A shop sold {a} apples in the morning and {b} in the afternoon. How many apples did it sell?",
        "Tom has {a} stamps and Anna has {b}. How many stamps do they have together?",
        "What is {a} plus {b}?",
        "A train had {a} passengers and {b} more got on. How many passengers are on the train now?",
        "A library has {a} novels and {b} comics. How many books is that?",
        "You walk {a} meters, then {b} meters more. How far did you walk?",
    ],
}
OPERAND_RANGES = {"multiply": (10, 99), "add": (100, 999)}


def question(task: dict[str, Any]) -> str:
    return WORDINGS[task["op"]][int(task["wording"])].format(a=task["a"], b=task["b"])


def answer_of(task: dict[str, Any]) -> int:
    return TOOLS[task["op"]](int(task["a"]), int(task["b"]))


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
    n_train: int = 240, n_held_out: int = 50, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Training and held-out tasks, half products and half sums, every wording equally often; the two sets share no
    unordered pair of numbers {a, b}."""
    rng = random.Random(seed)
    train: list[dict[str, Any]] = []
    held_out: list[dict[str, Any]] = []
    for op, (low, high) in OPERAND_RANGES.items():
        pairs: set[tuple[int, int]] = set()
        while len(pairs) < (n_train + n_held_out) // 2:
            a, b = rng.randint(low, high), rng.randint(low, high)
            pairs.add((min(a, b), max(a, b)))
        ordered = sorted(pairs)
        rng.shuffle(ordered)
        wordings = len(WORDINGS[op])
        for index, (small, large) in enumerate(ordered):
            a, b = (small, large) if rng.random() < 0.5 else (large, small)
            item = {"op": op, "a": a, "b": b, "wording": index % wordings}
            (held_out if index < n_held_out // 2 else train).append(item)
    rng.shuffle(train)
    return train, held_out
