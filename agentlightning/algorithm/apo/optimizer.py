"""Calls to APO's optimizer model (critiques and rewrites) through any OpenAI-compatible endpoint.

One place decides what is retried: connection failures, timeouts, 408/409/429 and 5xx answers are retried with
capped exponential backoff; other 4xx answers (a wrong model name, a bad key) are not, since the same request would
fail the same way. A call that still fails returns None and is counted; it never stops the run. The OpenAI client's
own retries are switched off for these calls so the retry count is exactly ours.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.utils.retry import RetryAttempt, RetryError, RetryEvent, RetryPolicy, retry_async

from .templates import MetaPrompt
from .types import APOStats, RolloutResultForAPO

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["EditOutcome", "EditPlan", "OptimizerClient", "TextualGradient"]

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 409, 429})


def _status(exc: BaseException) -> Optional[int]:
    # openai.APIStatusError and compatible clients carry the HTTP status as `status_code`.
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_retryable(exc: BaseException) -> bool:
    status = _status(exc)
    if status is None:
        return True  # connection errors, timeouts, unreadable answers
    return status in _RETRYABLE_STATUS or status >= 500


def _describe(exc: BaseException) -> str:
    status = _status(exc)
    if status is not None:
        return f"HTTP {status}: {getattr(exc, 'message', exc)}"
    return f"{type(exc).__name__}: {exc}"


class OptimizerClient:
    """Sends chat requests to the optimizer endpoint with retries, a concurrency limit and counters."""

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        stats: APOStats,
        retry: RetryPolicy,
        max_concurrency: int,
        completion_kwargs: Optional[dict[str, Any]] = None,
    ) -> None:
        with_options = getattr(client, "with_options", None)
        self._client: Any = with_options(max_retries=0) if callable(with_options) else client
        self._stats = stats
        self._retry = retry
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._completion_kwargs = dict(completion_kwargs or {})

    async def complete(
        self, *, model: str, messages: Sequence[dict[str, str]], temperature: float, purpose: str
    ) -> Optional[str]:
        """The answer's text ("" when the answer has no text), or None when every try failed."""

        async def call(attempt: RetryAttempt) -> Any:
            self._stats.llm_calls += 1
            return await self._client.chat.completions.create(
                model=model,
                messages=list(messages),  # type: ignore[arg-type]
                temperature=temperature,
                **self._completion_kwargs,
            )

        def log_retry(event: RetryEvent) -> None:
            self._stats.llm_retries += 1
            logger.warning(
                "APO %s call to model %r failed (%s); retry %d of %d in %.1f s",
                purpose,
                model,
                _describe(event.error),
                event.attempt,
                event.max_attempts - 1,
                event.delay,
            )

        async with self._semaphore:
            try:
                response = await retry_async(
                    call, self._retry, what=f"APO {purpose} call", retry_on=_is_retryable, on_retry=log_retry
                )
            except RetryError as exhausted:
                return self._failed(purpose, model, exhausted.cause, f" after {exhausted.attempts} tries")
            except Exception as exc:
                return self._failed(purpose, model, exc, " and is not retryable")
        choices = getattr(response, "choices", None) or []
        if not choices:
            return ""
        return getattr(choices[0].message, "content", None) or ""

    def _failed(self, purpose: str, model: str, exc: Exception, how: str) -> None:
        self._stats.llm_failures += 1
        logger.error(
            "APO %s call to model %r failed (%s)%s; this candidate is skipped", purpose, model, _describe(exc), how
        )


@dataclass(frozen=True)
class EditPlan:
    """The random choices of one critique-and-rewrite, drawn up front so concurrent calls stay reproducible."""

    gradient_template: MetaPrompt
    shown: list[RolloutResultForAPO]
    edit_template: MetaPrompt


@dataclass(frozen=True)
class EditOutcome:
    """What one critique-and-rewrite produced: a skip reason (None if the rewrite can be judged), the texts."""

    reason: Optional[str]
    critique: Optional[str]
    answer: Optional[str]


class TextualGradient:
    """Critique ("textual gradient") and rewrite ("apply edit") of a prompt template by the optimizer model."""

    def __init__(
        self,
        client: OptimizerClient,
        *,
        gradient_model: str,
        apply_edit_model: str,
        temperature: float,
        gradient_batch_size: int,
        gradient_prompts: Sequence[MetaPrompt],
        apply_edit_prompts: Sequence[MetaPrompt],
    ) -> None:
        self.client = client
        self.gradient_model = gradient_model
        self.apply_edit_model = apply_edit_model
        self.temperature = temperature
        self.gradient_batch_size = gradient_batch_size
        self.gradient_prompts = tuple(gradient_prompts)
        self.apply_edit_prompts = tuple(apply_edit_prompts)

    def plan(self, results: Sequence[RolloutResultForAPO], rng: random.Random) -> EditPlan:
        """Pick a critique template, `gradient_batch_size` of the runs to show (all if fewer), a rewrite template."""
        gradient_template = rng.choice(self.gradient_prompts)
        if len(results) <= self.gradient_batch_size:
            shown = list(results)
        else:
            shown = rng.sample(list(results), self.gradient_batch_size)
        return EditPlan(gradient_template, shown, rng.choice(self.apply_edit_prompts))

    async def critique(self, plan: EditPlan, prompt_text: str) -> Optional[str]:
        messages = plan.gradient_template.render(prompt_template=prompt_text, experiments=plan.shown)
        return await self.client.complete(
            model=self.gradient_model, messages=messages, temperature=self.temperature, purpose="critique"
        )

    async def rewrite(self, plan: EditPlan, prompt_text: str, critique: str) -> Optional[str]:
        messages = plan.edit_template.render(prompt_template=prompt_text, critique=critique)
        return await self.client.complete(
            model=self.apply_edit_model, messages=messages, temperature=self.temperature, purpose="rewrite"
        )

    async def critique_and_rewrite(self, plan: EditPlan, prompt_text: str) -> EditOutcome:
        """Critique, then rewrite. An empty critique skips the rewrite ("empty_critique", the template unchanged)."""
        critique = await self.critique(plan, prompt_text)
        if critique is None:
            return EditOutcome("critique_failed", None, None)
        if not critique.strip():
            return EditOutcome("empty_critique", critique, prompt_text)
        rewritten = await self.rewrite(plan, prompt_text, critique)
        if rewritten is None:
            return EditOutcome("rewrite_failed", critique, None)
        return EditOutcome(None, critique, rewritten)
