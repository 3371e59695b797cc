"""The runner's rules, as plain functions: what an agent's result means, and what to record on the attempt.

No I/O here. The runner loop (`agent.py`) asks these functions what to store and which status and reason to write,
so the rules are tested without a store, a tracer or an agent. The rules about time (polling, jitter, the store's
clock, cache freshness) are in `timing.py`.
"""

from __future__ import annotations

import logging
import math
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import AttemptedRollout, AttemptStatus, Span, SpanCoreFields

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "ERROR_SOURCE",
    "AgentBaseException",
    "AgentExit",
    "AgentTimeout",
    "AttemptOutcome",
    "NormalizedResult",
    "ResultNotStored",
    "RunnerInterrupted",
    "StoreDeclaredTimeout",
    "attempt_metadata",
    "is_connection_failure",
    "is_readable_span",
    "log_attempt_failure",
    "normalize_result",
    "outcome_of_exception",
]

logger = logging.getLogger("agentlightning.runner.agent")  # the runner's log, where these lines always were

ERROR_SOURCE = "error_source"
"""Attempt metadata key of a failure's source: "agent" (the agent's code raised on its own, e.g. on the model's
output) or "infrastructure" (a timeout, a stopped runner, the store, a hook, a connection to a server)."""

MAX_REASON_CHARS = 500
MAX_TRACEBACK_CHARS = 4000


class AgentTimeout(Exception):
    """The agent ran longer than the rollout's `timeout_seconds`."""

    def __init__(self, timeout_seconds: float) -> None:
        super().__init__(f"the agent did not finish within {timeout_seconds:g} s (RolloutConfig.timeout_seconds)")
        self.timeout_seconds = timeout_seconds


class StoreDeclaredTimeout(Exception):
    """The store marked the attempt as timed out while the agent was still running."""

    def __init__(self) -> None:
        super().__init__("the store marked the attempt as timed out while the agent was still running")


class AgentExit(Exception):
    """The agent called `sys.exit` (or raised SystemExit); the runner goes on with the next rollout."""

    def __init__(self, code: Any) -> None:
        super().__init__(f"the agent called sys.exit({code!r})")
        self.code = code


class AgentBaseException(Exception):
    """The agent raised a BaseException that is not an Exception (KeyboardInterrupt, CancelledError, GreenletExit,
    pytest's Failed, a class of its own). It fails the attempt like any error; only a stop of the runner itself stops
    the runner. `original` is what the agent raised."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}: {original}" if str(original) else type(original).__name__)
        self.original = original


class ResultNotStored(Exception):
    """The agent finished but the store refused its result or stayed unreachable past the runner's
    `store_retry_timeout`; the attempt fails with the store's error."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"the result could not be stored: {type(error).__name__}: {error}")
        self.error = error


class RunnerInterrupted(Exception):
    """The runner was stopped (Ctrl-C, stop signal) before the agent finished."""

    def __init__(self, detail: str = "the runner was stopped before the rollout finished") -> None:
        super().__init__(detail)


# ----------------------------------------------------------------------------------------------- results
def is_readable_span(value: Any) -> bool:
    """True for OpenTelemetry SDK spans (checked by class, without importing the SDK when nobody did)."""
    import sys

    module = sys.modules.get("opentelemetry.sdk.trace")
    return module is not None and isinstance(value, module.ReadableSpan)


@dataclass
class NormalizedResult:
    """What an agent's return value asks the runner to store."""

    reward: Optional[float] = None
    """A numeric result: the runner stores it as a reward span."""
    core_fields: list[SpanCoreFields] = field(default_factory=list)
    """Span fields to store (the store allocates their sequence ids)."""
    spans: list[Span] = field(default_factory=list)
    """Complete spans to store as they are."""
    otel_spans: list[ReadableSpan] = field(default_factory=list)
    """OpenTelemetry spans to convert and store."""
    empty_list: bool = False
    """The agent returned an empty list (usually a mistake: nothing to store)."""


def _type_names(items: Sequence[Any]) -> str:
    return ", ".join(sorted({type(item).__name__ for item in items}))


def normalize_result(result: Any) -> NormalizedResult:
    """Interpret an agent's return value.

    None: the agent emitted what it had to while running. A number (bool and int included): the final reward.
    A list of `Span`, of `SpanCoreFields` or of OpenTelemetry spans: stored for the attempt.

    Raises:
        TypeError: any other value (the message names its type); a list mixing kinds of items.
        ValueError: a reward that is NaN or infinite.
    """
    if result is None:
        return NormalizedResult()
    if isinstance(result, (bool, int, float)):
        reward = float(result)
        if not math.isfinite(reward):
            raise ValueError(f"the agent returned a reward of {reward}, which is not a finite number")
        return NormalizedResult(reward=reward)
    if isinstance(result, (list, tuple)):
        items: Sequence[Any] = result
        if not items:
            return NormalizedResult(empty_list=True)
        if all(isinstance(item, Span) for item in items):
            return NormalizedResult(spans=list(items))
        if all(isinstance(item, SpanCoreFields) for item in items):
            return NormalizedResult(core_fields=list(items))
        if all(is_readable_span(item) for item in items):
            return NormalizedResult(otel_spans=list(items))
        raise TypeError(
            f"the agent returned a list of {_type_names(items)}; a list result must contain only Span, only "
            "SpanCoreFields or only OpenTelemetry ReadableSpan items"
        )
    raise TypeError(
        f"the agent returned a {type(result).__name__}; expected None, a number (the reward), or a list of spans"
    )


# ---------------------------------------------------------------------------------------------- outcomes
@dataclass(frozen=True)
class AttemptOutcome:
    """The status to record for an attempt and, for failures, a readable reason."""

    status: AttemptStatus
    reason: Optional[str] = None
    error_type: Optional[str] = None
    traceback: Optional[str] = None
    source: Optional[str] = None  # for failures: "agent" or "infrastructure" (see ERROR_SOURCE)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


SUCCEEDED = AttemptOutcome("succeeded")


def _shorten(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit // 2
    return f"{text[:head]} ... [{len(text) - limit} characters cut] ... {text[-(limit - head) :]}"


def outcome_of_exception(exc: BaseException, *, raised_by_agent: bool = False) -> AttemptOutcome:
    """The attempt status and reason for an exception raised while running a rollout.

    Timeouts (the runner's or the store's) record "timeout", so a rollout whose `retry_condition` includes "timeout"
    is retried; everything else records "failed". `raised_by_agent`: the exception came out of the agent's own code;
    its source is "agent" unless it is a failure to reach a server (`is_connection_failure`).
    """
    infrastructure = "infrastructure"
    if isinstance(exc, (AgentTimeout, StoreDeclaredTimeout)):
        return AttemptOutcome("timeout", reason=str(exc), error_type=type(exc).__name__, source=infrastructure)
    agents = raised_by_agent and not isinstance(exc, RunnerInterrupted) and not is_connection_failure(exc)
    source = "agent" if agents else infrastructure
    if isinstance(exc, (AgentExit, RunnerInterrupted)):
        return AttemptOutcome("failed", reason=str(exc), error_type=type(exc).__name__, source=source)
    if isinstance(exc, AgentBaseException):
        exc = exc.original  # report what the agent raised, by its own type, message and traceback
    message = str(exc)
    reason = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return AttemptOutcome(
        "failed",
        reason=_shorten(reason, MAX_REASON_CHARS),
        error_type=type(exc).__name__,
        traceback=_shorten(tb, MAX_TRACEBACK_CHARS),
        source=source,
    )


_TRANSPORT_ERRORS = frozenset(
    {
        "openai.APIConnectionError",  # also APITimeoutError
        "httpx.TransportError",  # also its timeouts
        "aiohttp.ClientConnectionError",
        "aiohttp.ServerTimeoutError",
        "requests.ConnectionError",
        "requests.Timeout",
        "litellm.APIConnectionError",
        "litellm.Timeout",
    }
)


def is_connection_failure(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it was raised from or while handling) is a failure to reach a server rather
    than an error about the model's output: ConnectionError, TimeoutError, an HTTP client's transport error (openai,
    httpx, aiohttp, requests, litellm) or an answer with a 5xx status."""
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, AgentBaseException):
            current = current.original
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        names = {f"{cls.__module__.partition('.')[0]}.{cls.__name__}" for cls in type(current).__mro__}
        if names & _TRANSPORT_ERRORS:
            return True
        status = getattr(current, "status_code", None)
        if status is None:
            status = getattr(current, "status", None)
        if isinstance(status, int) and not isinstance(status, bool) and 500 <= status < 600:
            return True
        current = current.__cause__ or current.__context__
    return False


def attempt_metadata(
    previous: Optional[Mapping[str, Any]],
    outcome: AttemptOutcome,
    *,
    final_reward: Optional[float],
    duration_seconds: float,
) -> dict[str, Any]:
    """The attempt's metadata after the runner finished it: what it had, plus the reward, duration and failure.

    The reward in the metadata lets progress displays follow rewards without reading every rollout's spans.
    """
    metadata: dict[str, Any] = dict(previous or {})
    metadata["final_reward"] = final_reward
    metadata["duration_seconds"] = round(duration_seconds, 6)
    for key in ("error", "error_type", "traceback", ERROR_SOURCE):
        metadata.pop(key, None)
    if outcome.reason is not None:
        metadata["error"] = outcome.reason
    if outcome.error_type is not None:
        metadata["error_type"] = outcome.error_type
    if outcome.traceback is not None:
        metadata["traceback"] = outcome.traceback
    if outcome.source is not None and not outcome.succeeded:
        metadata[ERROR_SOURCE] = outcome.source
    return metadata


def log_attempt_failure(claimed: AttemptedRollout, outcome: AttemptOutcome, seen_errors: set[str]) -> None:
    """Log a failed or timed-out attempt; the first occurrence of each error (type and first line of its reason)
    with its traceback, later ones without (`seen_errors` keeps what was seen)."""
    logger.warning(
        "Rollout %s attempt %s %s: %s",
        claimed.rollout_id,
        claimed.attempt.attempt_id,
        "timed out" if outcome.status == "timeout" else "failed",
        outcome.reason,
    )
    key = f"{outcome.error_type}:{(outcome.reason or '').splitlines()[0] if outcome.reason else ''}"
    if outcome.traceback and key not in seen_errors:
        seen_errors.add(key)
        logger.warning(
            "First occurrence of this error (later ones are logged without traceback):\n%s", outcome.traceback
        )
