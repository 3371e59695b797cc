"""Explaining empty (or token-less) trajectories instead of silently returning [].

Every triplet adapter records a `TrajectoryDiagnosis` for its last call and logs a warning when the trajectory is
empty or when calls lack token ids, naming the cause and the counts:
- no spans at all;
- no LLM call captured (no span matched the LLM-call pattern; the most frequent span names are listed);
- the agent filter matched nothing (the agent names seen are listed);
- the calls carry no token ids (the server did not return them, e.g. vLLM without `return_token_ids`).

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

from agentlightning.types import Span, Triplet

__all__ = ["TrajectoryDiagnosis", "diagnose_trajectory", "quiet_diagnoses"]

logger = logging.getLogger("agentlightning.adapter")

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
    if llm_call_spans is None:
        pattern = re.compile(llm_call_match)
        llm_calls = sum(1 for span in spans if pattern.search(span.name))
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
    if not spans:
        diagnosis.reason = "no spans: the trace is empty (was the agent run inside the tracer's trace context?)"
    elif llm_calls == 0:
        unmatched = _unmatched_llm_names(spans)
        if unmatched:
            diagnosis.reason = (
                f"no LLM call matched llm_call_match={llm_call_match!r}, but {sum(unmatched.values())} spans record "
                f"LLM calls under other names ({', '.join(f'{n} ({c})' for n, c in unmatched.most_common(4))}): "
                "pass an llm_call_match that covers them"
            )
        else:
            diagnosis.reason = (
                f"no LLM call captured: none of the {len(spans)} spans matched llm_call_match={llm_call_match!r} "
                f"(most frequent span names: {', '.join(diagnosis.top_span_names)}). Is the LLM client instrumented "
                "(agentlightning.instrument_all() or OtelTracer(instrument=True))?"
            )
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
        logger.warning(
            "%s: %d of %d triplets have no prompt or response token ids (the server did not return them, e.g. vLLM "
            "without return_token_ids); they cannot be used for RL training",
            adapter,
            diagnosis.triplets_without_token_ids,
            len(triplets),
        )
    return diagnosis


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
