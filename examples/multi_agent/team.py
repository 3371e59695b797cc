"""Two agents in one rollout, each with a reward of its own: a solver and a reviewer, both plain OpenAI SDK code.

The solver answers "What is a + b?" after two worked examples (the main job's prompt, built by
examples/arithmetic_rl/agent.py); its reward is 1 for exactly the number, else 0.5 / (1 + distance) for the first
integer of its answer. The reviewer is shown the solver's answer and must say whether it is right; its reward
is 1 when its verdict ("yes" / "no") is correct, else 0. Each agent's work runs inside an `agl.operation` span with
`agent.name`, and each emits its reward inside that span, so GRPO attributes it to that agent. The rollout returns
the solver's reward (what a single-policy run, `agent_match="solver"`, trains on).

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

REVIEW = (
    "Question: what is {a} + {b}?\nProposed answer: {answer}\n"
    "Is the proposed answer exactly the right number? Reply with just yes or no."
)
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


def closeness(answer: str, expected: int) -> float:
    """1 for exactly the number; else 0.5 / (1 + distance) for the first integer in the answer; 0 without one."""
    if answer.strip() == str(expected):
        return 1.0
    match = re.search(r"-?\d+", answer)
    return 0.5 / (1 + abs(int(match.group()) - expected)) if match else 0.0


def verdict(review: str) -> Optional[bool]:
    """The reviewer's verdict: True for "yes", False for "no" (its first word), None for anything else."""
    match = re.match(r"\W*(yes|no)\b", review.strip().lower())
    return None if match is None else match.group(1) == "yes"


def review_reward(review: str, answer: str, expected: int) -> float:
    """1 when the verdict says correctly whether `answer` is exactly `expected`; 0 otherwise (no verdict: 0)."""
    said = verdict(review)
    return 1.0 if said is not None and said == (answer.strip() == str(expected)) else 0.0


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


class SolverAndReviewer(agl.LitAgent[dict[str, Any]]):
    """The team: the solver answers, the reviewer judges the answer; each rewarded inside its own span."""

    def rollout(self, task: dict[str, Any], resources: NamedResources, rollout: Rollout) -> float:
        expected = int(task["a"]) + int(task["b"])
        with agl.operation("solve", **{"agent.name": "solver"}):
            answer = _chat(agent_llm(resources, rollout, "solver"), messages_for(task), max_tokens=8)
            solved = closeness(answer, expected)
            agl.emit_reward(solved)
        with agl.operation("review", **{"agent.name": "reviewer"}):
            prompt = REVIEW.format(a=task["a"], b=task["b"], answer=answer.strip() or "(no answer)")
            review = _chat(
                agent_llm(resources, rollout, "reviewer"), [{"role": "user", "content": prompt}], max_tokens=4
            )
            agl.emit_reward(review_reward(review, answer, expected))
        return solved


solver_and_reviewer = SolverAndReviewer()
