"""Run one rollout of the calculator agent (examples/calc_agent, any of its framework versions) against a scripted
model, captured client-side or through the LLM proxy, and read back what the store holds.

The model is `tests/inference/scripted.py`: the real inference engine, server and tool parser, with each answer
chosen by a script of the conversation so far. A script is registered for one task's question (read from the
example's task.py, never written here) and gets the tool results the agent sent back after that question.
"""

from __future__ import annotations

import importlib
import itertools
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Optional

import agentlightning as agl
from agentlightning.adapter import LlmProxyTraceToTriplet, TracerTraceToTriplet
from agentlightning.runner import LitAgentRunner
from agentlightning.store import InMemoryLightningStore
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import LLM, Rollout, Span, Triplet

from .._load import load

FRAMEWORKS = {  # --framework name -> the example's agent module
    "openai": "agent_openai",
    "langgraph": "agent_langgraph",
    "agents-sdk": "agent_agents_sdk",
    "autogen": "agent_autogen",
    "pydantic-ai": "agent_pydantic_ai",
    "smolagents": "agent_smolagents",
    "llamaindex": "agent_llamaindex",
    "dspy": "agent_dspy",
    "litellm": "agent_litellm",
}
PACKAGES = {  # framework name -> the package it imports (the matrix skips a framework that is not installed)
    "openai": "openai",
    "langgraph": "langgraph",
    "agents-sdk": "agents",
    "autogen": "autogen_agentchat",
    "pydantic-ai": "pydantic_ai",
    "smolagents": "smolagents",
    "llamaindex": "llama_index.llms.litellm",
    "dspy": "dspy",
    "litellm": "litellm",
}
FIRST_FRAMEWORKS = ("openai", "langgraph", "agents-sdk", "autogen")
"""The frameworks the bad-input and agent_match tests cover (the others are in the matrix and the event-loop test)."""
CAPTURES = ("client", "proxy")
LLM_SPANS = ("openai.chat.completion", "openai.responses")
MODEL = "scripted"
SAMPLING = {"temperature": 0.0, "max_tokens": 200}  # the character-level tokenizer spends a token per character

Script = Callable[[list[str]], str]
"""The model's next answer, from the tool results the agent sent back since the question (oldest first)."""

_RESULT = re.compile(
    r"<tool_response>\n(.*?)\n</tool_response>"
    r"|Observation:\n(.*?)\s*<\|im_end\|>"
    r"|\[\[ ## observation_\d+ ## \]\]\n([^\n<]*)",  # (the test tokenizer has no "\n\n": it reads <unk>)
    re.DOTALL,
)
"""A tool's result in the rendered prompt: a tool message, smolagents' observation (a user message), or an
observation field of DSPy's ReAct trajectory."""


def agent_module(framework: str) -> ModuleType:
    return load("calc_agent", FRAMEWORKS[framework])


def calc() -> ModuleType:
    """The example's task module, as its agents import it (`task`, from the example's folder)."""
    load("calc_agent", "task")  # puts the folder on sys.path
    return importlib.import_module("task")


def max_tokens_of(llm: LLM) -> int:
    """The resource's `max_tokens` (the test model spends a token per character)."""
    return int(llm.sampling_parameters.get("max_tokens", SAMPLING["max_tokens"]))


def tool_call(name: str, **arguments: Any) -> str:
    """A tool call in the format the server parses (Hermes `<tool_call>`)."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def plan(task: dict[str, Any]) -> list[str]:
    """The tools a model that has learned the task calls, in order: the task's operation, once."""
    return [str(task["op"])]


def final_answer_tool(task: dict[str, Any]) -> Script:
    """`solving` for smolagents, which takes the answer as a call of its `final_answer` tool."""

    def script(results: list[str]) -> str:
        if not results:
            return tool_call(plan(task)[0], a=task["a"], b=task["b"])
        return tool_call("final_answer", answer=results[-1])

    return script


def dspy_fields(**fields: str) -> str:
    """An answer in DSPy's chat format: each output field under its `[[ ## name ## ]]` header."""
    return "".join(f"[[ ## {name} ## ]]\n{value}\n" for name, value in fields.items()) + "[[ ## completed ## ]]"


def react_fields(task: dict[str, Any]) -> Script:
    """`solving` for DSPy's ReAct, which reads each step from text fields: call the task's tool, then its `finish`
    tool, then (its extract step, which sees both observations) answer with the tool's result."""

    def script(results: list[str]) -> str:
        if not results:
            arguments = json.dumps({"a": task["a"], "b": task["b"]})
            return dspy_fields(next_thought="Use the tool.", next_tool_name=plan(task)[0], next_tool_args=arguments)
        if len(results) == 1:
            return dspy_fields(next_thought="I have the answer.", next_tool_name="finish", next_tool_args="{}")
        return dspy_fields(reasoning="The tool computed it.", answer=results[0])

    return script


def script_for(framework: str) -> Callable[[dict[str, Any]], Script]:
    """What a trained model does with `framework`: `solving`, in the shape the framework reads."""
    return {"smolagents": final_answer_tool, "dspy": react_fields}.get(framework, solving)


def solving(task: dict[str, Any]) -> Script:
    """What a model that has learned the task does: call the task's tool with the question's numbers, then answer
    with the tool's result."""

    def script(results: list[str]) -> str:
        if not results:
            return tool_call(plan(task)[0], a=task["a"], b=task["b"])
        return results[-1]

    return script


class Scripts:
    """The scripted model's answers: a script per registered question; other prompts are answered "ok"."""

    def __init__(self) -> None:
        self._scripts: dict[str, Script] = {}
        self._shown: dict[str, list[list[str]]] = {}
        self._lock = threading.Lock()
        self._numbers = itertools.count()

    def new_task(self, make_script: Callable[[dict[str, Any]], Script] = solving) -> dict[str, Any]:
        """A task no other test uses (the model caches its answer per prompt), answered by `make_script(task)`."""
        n = next(self._numbers)
        module = calc()
        op = sorted(module.OPERAND_RANGES)[n % 2]
        low, high = module.OPERAND_RANGES[op]
        task = {"op": op, "a": low + n % (high - low), "b": high - n // 2, "wording": n % len(module.WORDINGS[op])}
        with self._lock:
            self._scripts[calc().question(task)] = make_script(task)
        return task

    def shown(self, task: dict[str, Any]) -> list[list[str]]:
        """The tool results the model was shown before each of its answers on `task`'s question."""
        with self._lock:
            return list(self._shown.get(calc().question(task), []))

    def reply(self, prompt: str) -> str:
        with self._lock:
            found = [(prompt.rfind(question), question) for question in self._scripts if question in prompt]
            if not found:
                return "ok"
            position, question = max(found)
            script = self._scripts[question]
            results = ["".join(groups) for groups in _RESULT.findall(prompt[position + len(question) :])]
            self._shown.setdefault(question, []).append(results)
        return script(results)


@dataclass
class Outcome:
    """One finished rollout and its spans, with the adapter of its capture path."""

    task: dict[str, Any]
    rollout: Rollout
    attempt_id: str
    spans: list[Span]
    capture: str
    error: Optional[str] = None
    _triplets: Optional[list[Triplet]] = field(default=None, repr=False)

    @property
    def reward(self) -> Optional[float]:
        return agl.find_final_reward(self.spans)

    @property
    def llm_spans(self) -> list[Span]:
        return sorted((s for s in self.spans if s.name in LLM_SPANS), key=lambda s: s.sequence_id)

    def triplets(self, agent_match: Optional[str] = None) -> list[Triplet]:
        if self.capture == "proxy":
            assert agent_match is None, "the proxy's spans name no agent"
            return LlmProxyTraceToTriplet().adapt(self.spans)
        return TracerTraceToTriplet(agent_match=agent_match).adapt(self.spans)


def completion_tool_calls(span: Span) -> list[str]:
    """The names of the tools the model called in an LLM span's completion (client-side spans flatten the calls
    into `gen_ai.completion.0.tool_calls.<i>.name`, the proxy records them as one JSON list)."""
    attributes = span.attributes
    flat = re.compile(r"gen_ai\.completion\.0\.tool_calls\.(\d+)\.name")
    numbered = sorted((int(m.group(1)), str(v)) for k, v in attributes.items() if (m := flat.fullmatch(k)))
    names = [name for _, name in numbered]
    recorded = attributes.get("gen_ai.completion.0.tool_calls")
    if isinstance(recorded, str):
        names += [call["function"]["name"] for call in json.loads(recorded)]
    return names


def tool_runs(spans: Sequence[Span]) -> list[str]:
    """The tools a framework's own spans say it ran, in order (AutoGen's two spans per run count once)."""
    runs: list[tuple[int, str]] = []
    for span in sorted(spans, key=lambda s: s.sequence_id):
        name = span.attributes.get("tool.name") or span.attributes.get("gen_ai.tool.name")
        if isinstance(name, str):
            runs.append((span.sequence_id, name))
    collapsed: list[str] = []
    for _, name in runs:
        if not collapsed or collapsed[-1] != name:
            collapsed.append(name)
    return collapsed


def completion_text(span: Span) -> str:
    """The text of an LLM span's completion (the Responses API's client-side spans keep it in content parts)."""
    attributes = span.attributes
    return str(
        attributes.get("gen_ai.completion.0.content")
        or attributes.get("gen_ai.completion.0.content_parts.0.text")
        or ""
    )


def prompt_text(span: Span) -> str:
    """Every message of an LLM span's prompt, joined (client-side and proxy spans both flatten them)."""
    prompt = re.compile(r"gen_ai\.prompt\.(\d+)\.content")
    numbered = sorted((int(m.group(1)), str(v)) for k, v in span.attributes.items() if (m := prompt.fullmatch(k)))
    return "\n".join(text for _, text in numbered)


class Rollouts:
    """Runs rollouts of an agent through `LitAgentRunner` (its queue path: claim, resources, trace, result) with
    either capture: `client` (`OtelTracer(instrument=True)`, the model called directly) or `proxy` (a plain
    `OtelTracer` for the reward, the model called through the LLM proxy, which records each call)."""

    def __init__(self, store: InMemoryLightningStore, endpoint: str, proxy: Any) -> None:
        self.store = store
        self.endpoint = endpoint
        self.proxy = proxy

    def resource(self, capture: str) -> LLM:
        if capture == "client":
            return LLM(endpoint=self.endpoint, model=MODEL, sampling_parameters=dict(SAMPLING))
        return self.proxy.as_resource(model=MODEL, sampling_parameters=dict(SAMPLING))

    async def run(self, agent: Any, task: dict[str, Any], capture: str) -> Outcome:
        tracer = OtelTracer(instrument=capture == "client", flush_interval=0.05)
        runner: LitAgentRunner[Any] = LitAgentRunner(tracer=tracer, max_rollouts=1, poll_interval=0.05)
        resources = await self.store.add_resources({"main_llm": self.resource(capture)})
        queued = await self.store.enqueue_rollout(task, resources_id=resources.resources_id)
        with runner.run_context(agent=agent, store=self.store):
            await runner.iter()
        if capture == "proxy":
            await self.proxy.aflush()
        [rollout] = await self.store.wait_for_rollouts(rollout_ids=[queued.rollout_id], timeout=30)
        attempt = await self.store.get_latest_attempt(rollout.rollout_id)
        assert attempt is not None
        spans = list(await self.store.query_spans(rollout.rollout_id))
        error = (attempt.metadata or {}).get("error")
        return Outcome(task, rollout, attempt.attempt_id, spans, capture, error=error)
