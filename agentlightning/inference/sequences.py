"""What generation hands back: the growing sequences of a request, their token log-probs and the streamed deltas.

The scheduler thread sends each request's consumer `ChoiceStep` updates (see `batching.py`); `apply_update` grows
the consumer's own `SequenceState` objects from them, and `stream_deltas` cuts what is new since the last call
into `StreamDelta`s, holding back text that may still turn into a stop string or an incomplete UTF-8 character.
Plain data and pure functions: no model, no tokenizer, no threads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:
    from .sampling import SamplingParams

__all__ = [
    "ChoiceStep",
    "SequenceState",
    "StepUpdate",
    "StreamDelta",
    "TokenLogprob",
    "VisibleText",
    "apply_update",
    "stream_deltas",
]

VisibleText = Callable[[str, bool], int]
"""`visible(text, finished)`: how many leading characters of a sequence's text may be streamed now."""


@dataclass
class TokenLogprob:
    token_id: int
    token: str
    logprob: float
    top: list[tuple[int, str, float]] = field(default_factory=list)


@dataclass
class SequenceState:
    """One generated sequence (one choice) as it grows."""

    index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    text: str = ""
    emitted_chars: int = 0
    emitted_tokens: int = 0
    finish_reason: Optional[str] = None
    weights_version: str = ""
    """The weights version the sequence was generated with (a sequence never spans a weight swap)."""


@dataclass
class StreamDelta:
    """What one choice produced since the previous delta."""

    index: int
    token_ids: list[int]
    text: str
    logprobs: list[TokenLogprob]
    finish_reason: Optional[str]
    tool_calls: Optional[list[dict[str, Any]]] = None


@dataclass(frozen=True)
class ChoiceStep:
    """What one choice of a request gained in one step (sent from the scheduler to the request's consumer)."""

    index: int
    token_id: int
    logprob: Optional[TokenLogprob]
    text: str
    finish_reason: Optional[str]


StepUpdate = Union[list[ChoiceStep], BaseException]
"""One scheduler update for a request: the steps of its choices, or the error that ended it."""


def apply_update(sequences: list[SequenceState], update: StepUpdate, weights_version: str) -> bool:
    """Apply one scheduler update to the consumer's own sequences (True if anything changed); an exception sent by
    the scheduler is raised here."""
    if isinstance(update, BaseException):
        raise update
    for step in update:
        sequence = sequences[step.index]
        sequence.token_ids.append(step.token_id)
        if step.logprob is not None:
            sequence.logprobs.append(step.logprob)
        sequence.text = step.text
        sequence.finish_reason = step.finish_reason
        sequence.weights_version = weights_version
    return bool(update)


def stream_deltas(
    sequences: list[SequenceState], params: SamplingParams, visible: Optional[VisibleText] = None
) -> list[StreamDelta]:
    """The new tokens and text of each sequence since the previous call (see `InferenceEngine.deltas`)."""
    result: list[StreamDelta] = []
    for sequence in sequences:
        finished = sequence.finish_reason is not None
        safe = len(sequence.text)
        if not finished:
            if sequence.text.endswith("\ufffd"):  # an incomplete UTF-8 character: wait for more tokens
                safe = len(sequence.text.rstrip("\ufffd"))
            for stop in params.stop:  # hold back a suffix that may become a stop string
                for length in range(min(len(stop) - 1, safe), 0, -1):
                    if sequence.text[:safe].endswith(stop[:length]):
                        safe -= length
                        break
        if visible is not None:
            safe = min(safe, visible(sequence.text, finished))
        new_tokens = sequence.token_ids[sequence.emitted_tokens :]
        new_logprobs = sequence.logprobs[sequence.emitted_tokens :]
        text = sequence.text[sequence.emitted_chars : max(safe, sequence.emitted_chars)]
        if not new_tokens and not text and not finished:
            continue
        sequence.emitted_tokens = len(sequence.token_ids)
        sequence.emitted_chars = max(safe, sequence.emitted_chars)
        result.append(StreamDelta(sequence.index, new_tokens, text, new_logprobs, sequence.finish_reason))
    return result
