"""Errors an algorithm raises when its run cannot produce anything meaningful."""

from __future__ import annotations

__all__ = ["CAPTURE_HINT", "NoLLMCallsError"]

CAPTURE_HINT = (
    "Does the agent call the model it is given (the LLM resource's endpoint and model)? Are its calls captured: the "
    "Trainer's default tracer (OtelTracer(instrument='auto')) or OtelTracer(instrument=True) records the calls of "
    "the OpenAI SDK and the supported frameworks, and calls through an LLMProxy are always recorded; a custom tracer "
    "such as a bare OtelTracer() records none (docs/capture.md)."
)


class NoLLMCallsError(RuntimeError):
    """Every finished rollout of an algorithm's step (or phase) recorded no LLM call at all: there is nothing to learn
    from, which is a set-up mistake (capture off, or an agent that ignores the model it is given), not bad luck."""
