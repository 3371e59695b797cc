"""Test doubles with real I/O for the algorithm tests: a scripted optimizer server and a scripted runner.

`ScriptedOptimizer` is a real OpenAI-compatible HTTP server (Starlette on a loopback port, in a thread) whose
answers are a pure function of the request, so APO runs are reproducible:
- model "critic": reads the runs shown in the critique prompt and answers one bullet "add the rule for category X"
  per category whose run earned reward 0 (or "keep it as it is" when none failed);
- model "editor": takes the template and the critique out of the rewrite prompt and appends a line
  `Rule: X.` for each category the critique names and the template lacks;
- "junk-editor" answers text without placeholders, "empty-critic" answers nothing, "down" always answers 503,
  "flaky-critic" answers 500 to its first `flaky_failures` calls and then behaves as "critic".

`ScriptedRunner` plays the runner side against a real store: it claims rollouts, renders the prompt template of
the rollout's resources with the task, scores it (reward 1 when the prompt holds the task's rule), and writes an LLM
span, a reward span and the attempt status through the store API, as a real runner does.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.emitter.reward import emit_reward
from agentlightning.store.base import LightningStore
from agentlightning.types import PromptTemplate, Span
from agentlightning.utils.uvicorn_thread import UvicornThread

_RUN = re.compile(r"### Run \d+\n(.*?)(?=\n### Run |\Z)", re.DOTALL)
_CATEGORY_BULLET = re.compile(r"category (\w+)")
_FENCED = re.compile(r"```\n(.*?)\n```", re.DOTALL)


def scripted_critique(prompt: str) -> str:
    failing: set[str] = set()
    for block in _RUN.findall(prompt):
        reward = re.search(r"Reward: (\S+)", block)
        task = re.search(r"Task: (\{.*\})", block)
        if reward is None or task is None:
            continue
        if reward.group(1) in ("0.0", "none"):
            failing.add(json.loads(task.group(1))["category"])
    if not failing:
        return "- keep it as it is"
    return "\n".join(f"- add the rule for category {category}" for category in sorted(failing))


def scripted_rewrite(prompt: str) -> str:
    template_match = _FENCED.search(prompt)
    template = template_match.group(1) if template_match else ""
    critique = prompt.split("Critique:\n", 1)[1] if "Critique:\n" in prompt else ""
    additions = [
        f"Rule: {category}."
        for category in sorted(set(_CATEGORY_BULLET.findall(critique)))
        if f"Rule: {category}." not in template
    ]
    return "\n".join([template, *additions]) if additions else template


@dataclass
class ScriptedOptimizer:
    """The scripted optimizer server; `base_url` after `start()`; `requests` records every request body."""

    flaky_failures: int = 2
    requests: list[dict[str, Any]] = field(default_factory=list)
    _calls: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: Optional[UvicornThread] = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.port}/v1"

    def answer(self, model: str, prompt: str) -> tuple[int, Optional[str]]:
        with self._lock:
            self._calls[model] += 1
            calls = self._calls[model]
        if model == "down":
            return 503, None
        if model == "flaky-critic":
            if calls <= self.flaky_failures:
                return 500, None
            return 200, scripted_critique(prompt)
        if model == "critic":
            return 200, scripted_critique(prompt)
        if model == "empty-critic":
            return 200, ""
        if model == "editor":
            return 200, scripted_rewrite(prompt)
        if model == "junk-editor":
            return 200, "I think the template is fine as it is."
        return 404, None

    def start(self) -> ScriptedOptimizer:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            prompt = "\n".join(str(message.get("content") or "") for message in body.get("messages", []))
            status, text = self.answer(str(body.get("model")), prompt)
            if status != 200:
                return JSONResponse({"error": {"message": f"scripted status {status}"}}, status_code=status)
            return JSONResponse(
                {
                    "id": f"chatcmpl-{len(self.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )

        self._server = UvicornThread(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]))
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def client(self) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(base_url=self.base_url, api_key="test", max_retries=0)

    def calls(self, model: str) -> int:
        return self._calls[model]


def rule_reward(rendered: str, task: dict[str, Any]) -> Optional[float]:
    """1.0 when the rendered prompt states the rule of the task's category, else 0.0."""
    return 1.0 if f"Rule: {task['category']}." in rendered else 0.0


@dataclass
class ScriptedRunner:
    """Worker tasks that claim rollouts from `store` and complete them like a runner running a scripted agent."""

    store: LightningStore
    workers: int = 3
    reward_fn: Callable[[str, dict[str, Any]], Optional[float]] = rule_reward
    resource_name: str = "prompt"
    delay: float = 0.0
    seen: Counter[tuple[str, str]] = field(default_factory=Counter)  # (rendered prompt, task json) -> runs
    max_waiting: int = 0  # the most rollouts that were waiting in the queue when one was claimed
    on_claim: Optional[Callable[[Any], None]] = None  # called with each claimed rollout before it runs
    llm_span: bool = True  # False: the agent's call is not captured (only the reward is recorded)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def __aenter__(self) -> ScriptedRunner:
        self._tasks = [asyncio.create_task(self._work(f"runner-{index}")) for index in range(self.workers)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _work(self, worker_id: str) -> None:
        while not self._stop.is_set():
            claimed = await self.store.dequeue_rollout(worker_id=worker_id)
            if claimed is None:
                await asyncio.sleep(0.005)
                continue
            waiting = len(await self.store.query_rollouts(status_in=["queuing", "requeuing"])) + 1
            self.max_waiting = max(self.max_waiting, waiting)
            if self.on_claim is not None:
                self.on_claim(claimed)
            await self._complete(claimed.rollout_id, claimed.attempt.attempt_id, claimed.input, claimed.resources_id)

    async def _complete(self, rollout_id: str, attempt_id: str, task: Any, resources_id: Optional[str]) -> None:
        snapshot = await self.store.get_resources_by_id(resources_id) if resources_id else None
        template = snapshot.resources.get(self.resource_name) if snapshot else None
        assert isinstance(template, PromptTemplate), f"rollout {rollout_id} has no prompt template"
        rendered = template.format(**task)
        self.seen[(rendered, json.dumps(task, sort_keys=True))] += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        reward = self.reward_fn(rendered, task)
        answer = "correct" if reward else "unsure"
        llm = Span.from_attributes(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=await self.store.get_next_span_sequence_id(rollout_id, attempt_id),
            name="openai.chat.completion",
            attributes={
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": rendered,
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": answer,
                "gen_ai.request.model": "scripted-agent",
                "gen_ai.response.id": f"resp-{rollout_id}",
            },
            start_time=0.0,
            end_time=0.1,
        )
        if self.llm_span:
            await self.store.add_span(llm)
        if reward is not None:
            fields = emit_reward(reward, propagate=False)
            assert fields is not None
            sequence_id = await self.store.get_next_span_sequence_id(rollout_id, attempt_id)
            await self.store.add_span(
                Span.from_core_fields(fields, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id)
            )
        await self.store.update_attempt(rollout_id, attempt_id, status="succeeded")


def category_tasks(categories: list[str], per_category: int, prefix: str) -> list[dict[str, Any]]:
    """Tasks {"id", "category"} spread over the categories."""
    return [
        {"id": f"{prefix}-{category}-{index}", "category": category}
        for index in range(per_category)
        for category in categories
    ]
