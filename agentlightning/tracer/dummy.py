"""`DummyTracer`: a tracer without any backend.

It builds span fields for emitters (`emit_reward(..., propagate=False)` uses it) and keeps the spans created through
it during a trace context so that `get_last_trace` can return them. It never talks to OpenTelemetry or a store.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import Span, SpanCoreFields, SpanRecordingContext, TraceStatus

from .active import enter_active_tracer, exit_active_tracer
from .base import Tracer, TraceTarget
from .recording import CoreFieldsRecordingContext, sanitize_attributes

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["DummyTracer"]


class _DummyScope:
    def __init__(self, target: TraceTarget) -> None:
        self.target = target
        self.fields: list[SpanCoreFields] = []
        self.lock = threading.Lock()


class DummyTracer(Tracer):
    """A tracer that records span fields in memory only."""

    def __init__(self) -> None:
        super().__init__()
        self._scope_var: contextvars.ContextVar[Optional[_DummyScope]] = contextvars.ContextVar(
            f"agl_dummy_scope_{id(self)}", default=None
        )
        self._last_scope: Optional[_DummyScope] = None

    def __getstate__(self) -> dict[str, Any]:
        # Context variables and recorded scopes stay in the process/copy that made them (runners copy tracers).
        state = self.__dict__.copy()
        del state["_scope_var"]
        state["_last_scope"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._scope_var = contextvars.ContextVar(f"agl_dummy_scope_{id(self)}", default=None)

    def _record(self, fields: SpanCoreFields) -> None:
        scope = self._scope_var.get()
        if scope is not None:
            with scope.lock:
                scope.fields.append(fields)

    def create_span(
        self,
        name: str,
        attributes: Optional[Mapping[str, Any]] = None,
        timestamp: Optional[float] = None,
        status: Optional[TraceStatus] = None,
    ) -> SpanCoreFields:
        moment = timestamp if timestamp is not None else time.time()
        fields = SpanCoreFields(
            name=name,
            attributes=sanitize_attributes(attributes),
            start_time=moment,
            end_time=moment,
            status=status or TraceStatus(status_code="OK"),
        )
        self._record(fields)
        return fields

    @contextmanager
    def operation_context(
        self,
        name: str,
        attributes: Optional[Mapping[str, Any]] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Iterator[SpanRecordingContext]:
        recording = CoreFieldsRecordingContext(name, attributes, start_time)
        try:
            yield recording
        except BaseException as exc:
            recording.record_exception(exc)
            recording.record_status("ERROR", str(exc))
            raise
        finally:
            self._record(recording.finish(end_time))

    @contextmanager
    def _open(self, target: TraceTarget) -> Iterator[_DummyScope]:
        scope = _DummyScope(target)
        enter_active_tracer(self)
        token = self._scope_var.set(scope)
        self._last_scope = scope
        try:
            yield scope
        finally:
            self._scope_var.reset(token)
            exit_active_tracer(self)

    @asynccontextmanager
    async def trace_context(
        self,
        name: Optional[str] = None,
        *,
        store: Optional[LightningStore] = None,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
    ) -> AsyncIterator[_DummyScope]:
        target = self.resolve_target(store=store, rollout_id=rollout_id, attempt_id=attempt_id)
        with self._open(target) as scope:
            yield scope

    @contextmanager
    def _trace_context_sync(
        self,
        name: Optional[str] = None,
        *,
        store: Optional[LightningStore] = None,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
    ) -> Iterator[_DummyScope]:
        target = self.resolve_target(store=store, rollout_id=rollout_id, attempt_id=attempt_id)
        with self._open(target) as scope:
            yield scope

    def get_last_trace(self) -> list[Span]:
        scope = self._last_scope
        if scope is None:
            return []
        with scope.lock:
            fields = list(scope.fields)
        return [
            Span.from_core_fields(
                item,
                rollout_id=scope.target.rollout_id,
                attempt_id=scope.target.attempt_id,
                sequence_id=index + 1,
            )
            for index, item in enumerate(fields)
        ]
