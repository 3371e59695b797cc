"""Code that must never be traced into a rollout: `detached_from_traces()` and `untraced_asgi(app)`.

A server that lives in the same process as a rollout's trace context (the store server, the LLM proxy, an inference
server) must not have its spans attributed to that rollout, even though its thread did not inherit any trace
context (spans of such threads otherwise go to the single open context).

The mark is the trace scope variable itself: the tracer (`agentlightning.tracer.scope`) keeps the scope of the
running code in `CURRENT_SCOPE`, and code run under `detached_from_traces()` has the `DETACHED` marker there, which
no span processor owns. Both live here, in the ground layer, so that servers below the tracer can detach themselves
without importing it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

__all__ = ["CURRENT_SCOPE", "DETACHED", "DetachedScope", "detached_from_traces", "untraced_asgi"]


class DetachedScope:
    """The scope of code that must never be traced into a rollout: it has no owner, so every processor ignores it."""

    name = "detached"
    owner: Any = None

    def __repr__(self) -> str:
        return "DETACHED"


DETACHED = DetachedScope()
"""The one detached scope."""

CURRENT_SCOPE: contextvars.ContextVar[Any] = contextvars.ContextVar("agentlightning_trace_scope", default=None)
"""The trace scope of the running code: None, `DETACHED` or the tracer's `TraceScope` (typed there)."""


@contextmanager
def detached_from_traces() -> Iterator[None]:
    """Spans started in this block (and in tasks and threads that inherit its context) belong to no rollout."""
    token = CURRENT_SCOPE.set(DETACHED)
    try:
        yield
    finally:
        CURRENT_SCOPE.reset(token)


_ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def untraced_asgi(app: _ASGIApp) -> _ASGIApp:
    """Wrap an ASGI app so that nothing it does (requests, lifespan, background tasks) is traced into a rollout.

    Web frameworks (FastAPI's native telemetry, ASGI instrumentors) create spans for every request; when the server
    runs in the same process as an open trace context those spans would otherwise land in the rollout.
    """

    async def detached_app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        with detached_from_traces():
            await app(scope, receive, send)

    return detached_app
