"""Two agents in one rollout, each with a reward of its own: a solver and a reviewer, both plain OpenAI SDK code.

The solver answers "What is a + b?" after two worked examples (the main job's prompt, built by
examples/arithmetic_rl/agent.py); its reward is 1 for exactly the number, else 0.5 / (1 + distance) for the first
integer of its answer. The reviewer is shown a proposed answer and must say whether it is right. It writes the sum and
sets it beside the answer before its verdict ("3 + 5 = 8; 8 vs 8, so yes"), after four worked examples, two of each
verdict. It is measured on correct reviews (`correct_review`: faithful working, naming the question's numbers, their
sum and the answer shown, and the verdict that follows) and trained on `review_reward`: 0.5 for faithful working plus
0.5 for a verdict that follows from the two numbers it wrote side by side, whatever they are, so that a review whose
working went wrong still teaches the comparison. Which answer it is shown is fixed by the task (`review_input`): a
"right" task shows the sum (the solver's own answer whenever the solver got it right), a "wrong" task the solver's
wrong number when it gave one (`"solver_mistakes": true`), else the sum moved by the task's `offset`. Half of the
tasks are of each kind, so neither "yes" nor "no" is a base rate the reviewer can learn instead of checking, however
good the solver gets. Paid for its verdict alone, the untrained reviewer (which gets 94 % of the sums right but copies
the proposed answer wrongly in a quarter of its reviews and says "no" even to "7 vs 7") learned one verdict for
everything instead of the comparison; paid for correct reviews alone, it learned faithful working and "yes" to
everything (docs/benchmarks-appendix.md). Each agent's work runs inside an
`agl.operation` span with `agent.name`, and each emits its reward inside that span, so GRPO attributes it to that
agent. The rollout returns the solver's reward (what a single-policy run, `agent_match="solver"`, trains on).

Each agent calls the LLM resource it was handed: `solver_llm` / `reviewer_llm` when GRPO trains that agent's own
LoRA adapter (`agent_match=["solver", "reviewer"]`), else the shared `main_llm` (the base model).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Optional

# The solver's chat is the main job's prompt (two worked examples, then the question), built by the arithmetic agent's
# `messages_for`. Its folder is appended, not inserted, so that this folder's own modules come first; runner processes
# import this module, so they find it too.
sys.path.append(str(Path(__file__).resolve().parents[1] / "arithmetic_rl"))

from agent import messages_for  # pyright: ignore[reportMissingImports]  # examples/arithmetic_rl/agent.py

import agentlightning as agl
from agentlightning.types import LLM, AttemptedRollout, NamedResources, ProxyLLM, Rollout

REVIEW = "Question: what is {a} + {b}?\nProposed answer: {answer}\nWork out the sum, then say if the answer is right."
REVIEW_REPLY = "{a} + {b} = {total}; {total} vs {answer}, so {verdict}"
# The reviewer's worked examples, two of each verdict: (a, b, the proposed answer).
REVIEW_EXAMPLES = ((3, 5, 8), (6, 2, 9), (4, 7, 10), (2, 6, 8))
REVIEW_TOKENS = 24  # "7 + 8 = 15; 15 vs 15, so yes" is 18 tokens of SmolLM2's vocabulary
REVIEW_KINDS = ("right", "wrong")
SHARED_RESOURCE = "main_llm"


def _chat(llm: LLM, messages: list[dict[str, str]], max_tokens: int) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=2)
    reply = client.chat.completions.create(
        model=llm.model,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=max_tokens,
        temperature=llm.sampling_parameters.get("temperature", 0.0),
    )
    return reply.choices[0].message.content or ""


def first_integer(text: str) -> Optional[int]:
    """The first integer in `text` (None without one)."""
    match = re.search(r"-?\d+", text)
    return int(match.group()) if match else None


def closeness(answer: str, expected: int) -> float:
    """1 for exactly the number; else 0.5 / (1 + distance) for the first integer in the answer; 0 without one."""
    if answer.strip() == str(expected):
        return 1.0
    said = first_integer(answer)
    return 0.5 / (1 + abs(said - expected)) if said is not None else 0.0


def verdict(review: str) -> Optional[bool]:
    """The reviewer's verdict: True for "yes", False for "no" (its last such word: the sum comes first), None
    without one."""
    words = re.findall(r"\b(yes|no)\b", review.lower())
    return None if not words else words[-1] == "yes"


def review_messages(a: int, b: int, shown: str) -> list[dict[str, str]]:
    """The reviewer's chat: its worked examples (the sum, the sum beside the proposed answer, the verdict), then the
    answer to judge.
    Writing the sum first is what lets a small model check rather than guess; asked for a bare "yes" or "no" it
    learns to say "yes" to everything."""
    messages: list[dict[str, str]] = []
    for x, y, proposed in REVIEW_EXAMPLES:
        said = "yes" if proposed == x + y else "no"
        messages += [
            {"role": "user", "content": REVIEW.format(a=x, b=y, answer=proposed)},
            {"role": "assistant", "content": REVIEW_REPLY.format(a=x, b=y, total=x + y, answer=proposed, verdict=said)},
        ]
    return [*messages, {"role": "user", "content": REVIEW.format(a=a, b=b, answer=shown)}]


def review_kind(task: dict[str, Any]) -> str:
    """Whether the task shows the reviewer a right or a wrong answer ("right" / "wrong"; the `balance_by` key).
    Raises ValueError naming what is missing or malformed."""
    kind = task.get("review")
    if kind not in REVIEW_KINDS:
        raise ValueError(f"task {task!r}: 'review' must be one of {list(REVIEW_KINDS)}, got {kind!r}")
    if kind == "wrong":
        offset = task.get("offset")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset == 0:
            raise ValueError(f"task {task!r}: a 'wrong' review needs a non-zero integer 'offset', got {offset!r}")
        if int(task["a"]) + int(task["b"]) + offset < 0:
            raise ValueError(f"task {task!r}: 'offset' {offset} makes the wrong answer negative")
    return kind


def review_input(task: dict[str, Any], answer: str) -> tuple[str, bool]:
    """The answer the reviewer judges, given the solver's `answer`, and whether it is right.

    A "right" task shows the sum (which is the solver's answer whenever the solver got it right); a "wrong" task
    shows the solver's own wrong number when it gave one and the task allows it (`solver_mistakes`), else the sum
    plus the task's `offset`. So the answer is right exactly for "right" tasks, whatever the solver did.
    """
    expected = int(task["a"]) + int(task["b"])
    if review_kind(task) == "right":
        return str(expected), True
    said = first_integer(answer)
    if task.get("solver_mistakes") and said is not None and said != expected:
        return str(said), False
    return str(expected + int(task["offset"])), False


REVIEW_WORK = re.compile(
    r"^\s*(-?\d+)\s*\+\s*(-?\d+)\s*=\s*(-?\d+)\s*;\s*(-?\d+)\s*vs\s*(-?\d+)\s*,\s*so\s+(yes|no)\b", re.IGNORECASE
)
"""A review written as the worked examples are: "a + b = total; total vs answer, so verdict"."""


def review_checks(review: str, a: int, b: int, shown: str) -> Optional[tuple[bool, bool]]:
    """Two checks of a review of `shown` as the answer to a + b, or None when it is not written as the worked
    examples are: whether its working is faithful (the question's numbers, their sum, that sum beside the answer
    shown), and whether its verdict follows from the two numbers it set side by side ("yes" exactly when they are
    equal), whatever they are."""
    match = REVIEW_WORK.match(review)
    if match is None:
        return None
    x, y, total, left, right = (int(group) for group in match.groups()[:5])
    said_yes = match.group(6).lower() == "yes"
    return (x, y, total, left, right) == (a, b, a + b, a + b, int(shown)), said_yes == (left == right)


def correct_review(review: str, a: int, b: int, shown: str) -> bool:
    """A correct review: faithful working and the verdict that follows from it (so "yes" exactly when `shown` is
    a + b). What the reviewer is measured on."""
    return review_checks(review, a, b, shown) == (True, True)


def review_reward(review: str, a: int, b: int, shown: str) -> float:
    """The reviewer's training reward: 0.5 for faithful working plus 0.5 for a verdict that follows from the numbers
    it wrote side by side (1 exactly for a correct review, 0 for a review not written as the worked examples are).

    The verdict's half is judged on the reviewer's own numbers so that a review whose working went wrong still
    teaches the comparison: rewarded for correct reviews alone, a miscopied review ("7 vs 2, so no" when shown 7)
    scored 0 and pushed its "no" down with the rest of its tokens, and as the untrained reviewer miscopies a
    quarter of its inputs and says "no" to nearly everything, that pushed every verdict towards "yes" until it said
    "yes" to everything (docs/benchmarks-appendix.md)."""
    checks = review_checks(review, a, b, shown)
    return 0.0 if checks is None else 0.5 * checks[0] + 0.5 * checks[1]


def agent_llm(resources: NamedResources, rollout: Rollout, agent: str) -> LLM:
    """The LLM agent `agent` calls: its own resource (`<agent>_llm`) when it has one, else the shared one."""
    llm = resources.get(f"{agent}_llm") or resources.get(SHARED_RESOURCE)
    if not isinstance(llm, LLM):
        raise ValueError(f"No LLM resource for agent {agent!r}: expected {agent}_llm or {SHARED_RESOURCE}")
    if isinstance(llm, ProxyLLM):
        if not isinstance(rollout, AttemptedRollout):
            raise ValueError(f"Rollout {rollout.rollout_id} has no attempt to address the proxy with")
        llm = llm.with_attempted_rollout(rollout)
    return llm


def agent_attributes(agent: str) -> dict[str, Any]:
    """The span attributes that name the agent whose work an `agl.operation` span holds (`agent.name`)."""
    return {"agent.name": agent}


class SolverAndReviewer(agl.LitAgent[dict[str, Any]]):
    """The team: the solver answers, the reviewer judges the task's review input; each rewarded inside its own span."""

    def rollout(self, task: dict[str, Any], resources: NamedResources, rollout: Rollout) -> float:
        review_kind(task)  # a malformed task fails here, before any call
        expected = int(task["a"]) + int(task["b"])
        with agl.operation("solve", **agent_attributes("solver")):
            answer = _chat(agent_llm(resources, rollout, "solver"), messages_for(task), max_tokens=8)
            solved = closeness(answer, expected)
            agl.emit_reward(solved)
        with agl.operation("review", **agent_attributes("reviewer")):
            shown, _ = review_input(task, answer)
            messages = review_messages(int(task["a"]), int(task["b"]), shown)
            review = _chat(agent_llm(resources, rollout, "reviewer"), messages, max_tokens=REVIEW_TOKENS)
            agl.emit_reward(review_reward(review, int(task["a"]), int(task["b"]), shown))
        return solved


solver_and_reviewer = SolverAndReviewer()
