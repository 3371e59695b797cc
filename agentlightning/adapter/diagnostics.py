"""Explaining empty (or token-less) trajectories instead of silently returning [].

Every triplet adapter records a `TrajectoryDiagnosis` for its last call and logs a warning when the trajectory is
empty or when calls lack token ids, naming the cause and the counts:
- no spans at all;
- every LLM call failed without an answer (nothing reached the LLM proxy the calls were sent to, or the model
  server): the first error and the fix;
- no LLM call captured, with the cause the spans show: the agent's client is LiteLLM with a provider other than its
  OpenAI one (its own spans are there), the calls were recorded under other span names, or no instrumented client
  recorded a call (naming the clients that bypass the OpenAI SDK: only an LLM proxy records those);
- the agent filter matched nothing (the agent names seen are listed);
- the calls carry no token ids (the server did not return them, e.g. vLLM without `return_token_ids`).

Calls are counted once however many spans record them (the client's span and the LLM proxy's, see
`call_identity`).

A caller that reports diagnoses itself, once per run rather than once per rollout (Baseline), adapts inside
`quiet_diagnoses()` and reads `last_diagnosis`.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

from agentlightning.llm_proxy.call_link import VIA_PROXY
from agentlightning.types import Span, Triplet

from .call_identity import count_llm_calls, group_llm_calls

__all__ = ["TrajectoryDiagnosis", "diagnose_trajectory", "quiet_diagnoses"]

logger = logging.getLogger("agentlightning.adapter")

OPENINFERENCE_KIND = "openinference.span.kind"
PROXY_SERVICE = "agentlightning.llm_proxy"
"""`service.name` of the spans the LLM proxy records."""
LITELLM_SPAN_NAMES = frozenset({"litellm_request", "raw_gen_ai_request"})
"""Span names of LiteLLM's own OpenTelemetry callback."""

_quiet: contextvars.ContextVar[bool] = contextvars.ContextVar("agl_quiet_diagnoses", default=False)


@contextmanager
def quiet_diagnoses() -> Iterator[None]:
    """Within this block diagnoses are recorded (`last_diagnosis`) but not logged: the caller reports them."""
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)


@dataclass
class TrajectoryDiagnosis:
    """What an adapter saw while building a trajectory, and why it may be empty."""

    total_spans: int = 0
    llm_call_spans: int = 0
    selected_llm_calls: int = 0
    triplets: int = 0
    triplets_without_token_ids: int = 0
    reward_spans: int = 0
    agent_names: list[str] = field(default_factory=list)
    top_span_names: list[str] = field(default_factory=list)
    reason: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def diagnose_trajectory(
    spans: Sequence[Span],
    triplets: Sequence[Triplet],
    *,
    llm_call_match: str,
    agent_match: Optional[str] = None,
    agent_names: Sequence[str] = (),
    selected_llm_calls: Optional[int] = None,
    llm_call_spans: Optional[int] = None,
    reward_spans: int = 0,
    adapter: str = "adapter",
) -> TrajectoryDiagnosis:
    """Explain the outcome of an adaptation; logs a warning when something is missing. Returns the diagnosis.

    `llm_call_spans` overrides the count of LLM-call spans (otherwise: spans whose name matches `llm_call_match`).
    """
    pattern = re.compile(llm_call_match)
    if llm_call_spans is None:
        llm_calls = count_llm_calls([span for span in spans if pattern.search(span.name)])
    else:
        llm_calls = llm_call_spans
    names = Counter(span.name for span in spans)
    diagnosis = TrajectoryDiagnosis(
        total_spans=len(spans),
        llm_call_spans=llm_calls,
        selected_llm_calls=selected_llm_calls if selected_llm_calls is not None else llm_calls,
        triplets=len(triplets),
        triplets_without_token_ids=sum(
            1 for triplet in triplets if not _token_ids(triplet.prompt) or not _token_ids(triplet.response)
        ),
        reward_spans=reward_spans,
        agent_names=sorted(set(agent_names)),
        top_span_names=[f"{name} ({count})" for name, count in names.most_common(8)],
    )
    failed = failed_llm_calls(spans, pattern)
    if not spans:
        diagnosis.reason = "no spans: the trace is empty (was the agent run inside the tracer's trace context?)"
    elif failed and not triplets and len(failed) >= llm_calls:
        diagnosis.reason = _failed_calls_reason(failed)
    elif llm_calls == 0:
        diagnosis.reason = _no_call_reason(spans, llm_call_match, diagnosis.top_span_names)
    elif not triplets and agent_match is not None and diagnosis.selected_llm_calls == 0:
        diagnosis.reason = (
            f"the agent filter matched nothing: {llm_calls} LLM calls were captured but none lies under an agent "
            f"matching agent_match={agent_match!r} (agents seen: {diagnosis.agent_names or 'none'})"
        )
    elif not triplets and diagnosis.selected_llm_calls > 0:
        diagnosis.reason = (
            f"no token ids on the calls: {diagnosis.selected_llm_calls} LLM calls were selected but none carries "
            "prompt and response token ids (the server must return them, e.g. vLLM with return_token_ids)"
        )
    elif not triplets:
        diagnosis.reason = f"no triplets from {llm_calls} LLM-call spans (all excluded, e.g. inside reward spans)"
    if _quiet.get():
        return diagnosis
    if diagnosis.reason is not None:
        logger.warning("%s produced an empty trajectory: %s", adapter, diagnosis.reason)
    elif diagnosis.triplets_without_token_ids:
        cause = (
            f"{len(failed)} of the calls failed: {_failed_calls_reason(failed)}"
            if failed
            else "the server did not return them, e.g. vLLM without return_token_ids"
        )
        logger.warning(
            "%s: %d of %d triplets have no prompt or response token ids (%s); they cannot be used for RL training",
            adapter,
            diagnosis.triplets_without_token_ids,
            len(triplets),
            cause,
        )
    return diagnosis


def failed_llm_calls(spans: Sequence[Span], pattern: re.Pattern[str]) -> list[list[Span]]:
    """The LLM calls (grouped as in `call_identity`) whose every span failed and carries no token ids: calls that
    never got an answer (a server or proxy that was down, refused the connection, or answered an error)."""
    calls = [
        span
        for span in spans
        if pattern.search(span.name) or VIA_PROXY in span.attributes or span.attributes.get(OPENINFERENCE_KIND) == "LLM"
    ]
    return [
        group
        for group in group_llm_calls(calls)
        if all(span.status.status_code == "ERROR" and not span.attributes.get("prompt_token_ids") for span in group)
    ]


def _failed_calls_reason(failed: list[list[Span]]) -> str:
    first = failed[0][0]
    error = first.status.description or first.attributes.get("error.message") or _exception_message(first) or "?"
    proxies = sorted(
        {str(span.attributes[VIA_PROXY]) for group in failed for span in group if VIA_PROXY in span.attributes}
    )
    reached_proxy = any(
        span.resource.attributes.get("service.name") == PROXY_SERVICE for group in failed for span in group
    )
    if proxies and not reached_proxy:
        return (
            f"nothing reached the LLM proxy: the {len(failed)} LLM calls to {', '.join(proxies)} failed (first error: "
            f"{error}). Is the proxy running at that address? A Trainer(llm_proxy=...) starts its proxy for the run; "
            "a proxy you create yourself needs proxy.start() before the agents call it"
        )
    return (
        f"the {len(failed)} LLM calls failed, none got an answer (first error: {error}): is the model server (or "
        "LLM proxy) the agent calls running and reachable at the LLM resource's endpoint?"
    )


def _no_call_reason(spans: Sequence[Span], llm_call_match: str, top_span_names: list[str]) -> str:
    unmatched = _unmatched_llm_names(spans)
    litellm = sorted({span.name for span in spans if _is_litellm_span(span)})
    if litellm:
        return (
            f"no LLM call captured: the agent calls its model through LiteLLM (its spans: {', '.join(litellm)}) "
            "with a provider that does not call through the OpenAI SDK, so zero-code capture does not record it. "
            "Use LiteLLM's OpenAI provider (model='openai/<name>', api_base=<the LLM resource's endpoint>), which "
            "the default tracer records with token ids, or point LiteLLM at an LLMProxy (api_base="
            "llm.get_base_url(rollout_id, attempt_id)): the proxy records every call with its token ids, whatever "
            "the client (spans of v0.2's LiteLLM proxy are read by LlmProxyTraceToTriplet)"
        )
    if unmatched:
        return (
            f"no LLM call matched llm_call_match={llm_call_match!r}, but {sum(unmatched.values())} spans record "
            f"LLM calls under other names ({', '.join(f'{n} ({c})' for n, c in unmatched.most_common(4))}): "
            "pass an llm_call_match that covers them"
        )
    return (
        f"no LLM call captured: none of the {len(spans)} spans matched llm_call_match={llm_call_match!r} "
        f"(most frequent span names: {', '.join(top_span_names)}), so no instrumented LLM client recorded a call. "
        "Is the LLM client instrumented (agentlightning.instrument_all() or OtelTracer(instrument=True); the "
        "Trainer's default tracer instruments the OpenAI SDK and the supported frameworks)? Clients that bypass the "
        "OpenAI SDK are never recorded client-side: LiteLLM providers other than openai/ (e.g. hosted_vllm/), "
        "DSPy's default engine (pass dspy.LM(..., engine='litellm')), raw HTTP, programs in other languages. Any "
        "client is recorded when its calls go through an LLMProxy (Trainer(llm_proxy=...), the agent calling the "
        "LLM resource's endpoint)"
    )


def _is_litellm_span(span: Span) -> bool:
    return span.name in LITELLM_SPAN_NAMES or span.attributes.get("gen_ai.system") == "litellm"


def _exception_message(span: Span) -> Optional[str]:
    for event in span.events:
        if event.name == "exception":
            message = event.attributes.get("exception.message")
            if message:
                return str(message)
    return None


def _unmatched_llm_names(spans: Sequence[Span]) -> Counter[str]:
    """Names of spans that record an LLM call (token ids, or the model's completion) under a name the adapter's
    pattern did not match: instrumented, but named otherwise (`openai.responses`, a framework's own name)."""
    found: Counter[str] = Counter()
    for span in spans:
        attributes = span.attributes
        if "prompt_token_ids" in attributes or any(key.startswith("gen_ai.completion.") for key in attributes):
            found[span.name] += 1
    return found


def _token_ids(part: object) -> bool:
    return isinstance(part, dict) and bool(part.get("token_ids"))  # type: ignore[union-attr]
