"""`operation`: trace a function call (or a block) as an `agentlightning.operation` span with its inputs and output.

    @operation                        # span named after the function
    def plan(task): ...

    @operation(name="grade", propagate=False, judge="gpt")   # extra attributes
    async def grade(answer): ...

    with operation("retrieve") as op: # as a context manager
        op.set_input(query=q)
        op.set_output(docs)

Spans created inside (LLM calls, rewards) become children of the operation span. Inputs are recorded as
`agentlightning.operation.input.<argument>` and the result as `agentlightning.operation.output` (nested values
flattened, values OpenTelemetry cannot hold stored as JSON text or repr). Exceptions are recorded on the span and
re-raised.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Optional, TypeVar, Union, cast, overload

from agentlightning.semconv import AGL_OPERATION, LightningSpanAttributes
from agentlightning.types import SpanCoreFields, SpanRecordingContext
from agentlightning.utils.otel import flatten_attributes

from .dispatch import open_operation

__all__ = ["OperationContext", "operation"]

logger = logging.getLogger("agentlightning.emitter")

F = TypeVar("F", bound=Callable[..., Any])

_INPUT = LightningSpanAttributes.OPERATION_INPUT.value
_OUTPUT = LightningSpanAttributes.OPERATION_OUTPUT.value
_NAME = LightningSpanAttributes.OPERATION_NAME.value


def _flatten_under(prefix: str, value: Any) -> dict[str, Any]:
    try:
        return dict(flatten_attributes({prefix: value}))
    except Exception:
        return {prefix: repr(value)}


class OperationContext:
    """An operation span: a context manager (sync or async) and a decorator."""

    def __init__(
        self, name: Optional[str] = None, *, propagate: bool = True, attributes: Optional[Mapping[str, Any]] = None
    ):
        self.name = name
        self.propagate = propagate
        self.attributes: dict[str, Any] = dict(attributes or {})
        self._manager: Optional[AbstractContextManager[SpanRecordingContext]] = None
        self._recording: Optional[SpanRecordingContext] = None

    # ------------------------------------------------------------------------------------------- recording
    def set_input(self, *args: Any, **kwargs: Any) -> None:
        """Record inputs: positional ones as `input.<index>`, keyword ones as `input.<name>`."""
        values: dict[str, Any] = {str(index): value for index, value in enumerate(args)}
        values.update(kwargs)
        self._record(
            {key: v for name, value in values.items() for key, v in _flatten_under(f"{_INPUT}.{name}", value).items()}
        )

    def set_output(self, value: Any) -> None:
        """Record the operation's result."""
        self._record(_flatten_under(_OUTPUT, value))

    def _record(self, attributes: Mapping[str, Any]) -> None:
        if self._recording is None:
            logger.error("OperationContext.set_input/set_output called outside the operation; ignored")
            return
        self._recording.record_attributes(attributes)

    def get_recorded_span(self) -> Optional[SpanCoreFields]:
        """The fields recorded so far (None before the operation started)."""
        return self._recording.get_recorded_span() if self._recording is not None else None

    def span(self) -> SpanCoreFields:
        """The recorded span (v0.3): available once the operation has started.

        Raises:
            RuntimeError: the operation has not started yet.
        """
        recorded = self.get_recorded_span()
        if recorded is None:
            raise RuntimeError("The operation has not started yet: its span is not ready")
        return recorded

    # -------------------------------------------------------------------------------------- context manager
    def __enter__(self) -> OperationContext:
        attributes = dict(flatten_attributes(self.attributes)) if self.attributes else {}
        attributes[_NAME] = self.name or "operation"
        self._manager = open_operation(AGL_OPERATION, attributes, propagate=self.propagate)
        self._recording = self._manager.__enter__()
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        manager = self._manager
        self._manager = None
        if manager is not None:
            manager.__exit__(exc_type, exc, traceback)

    async def __aenter__(self) -> OperationContext:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.__exit__(exc_type, exc, traceback)

    # -------------------------------------------------------------------------------------------- decorator
    def __call__(self, func: F) -> F:
        name = self.name or getattr(func, "__qualname__", None) or getattr(func, "__name__", "operation")
        propagate = self.propagate
        attributes = self.attributes
        try:
            signature: Optional[inspect.Signature] = inspect.signature(func)
        except (TypeError, ValueError):
            signature = None

        def inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            if signature is not None:
                try:
                    bound = signature.bind(*args, **kwargs)
                    bound.apply_defaults()
                    return {key: value for key, value in bound.arguments.items() if key not in ("self", "cls")}
                except TypeError:
                    pass
            values: dict[str, Any] = {str(index): value for index, value in enumerate(args)}
            values.update(kwargs)
            return values

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with OperationContext(name, propagate=propagate, attributes=attributes) as op:
                    op.set_input(**inputs(args, kwargs))
                    result = await func(*args, **kwargs)
                    op.set_output(result)
                    return result

            return cast(F, async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with OperationContext(name, propagate=propagate, attributes=attributes) as op:
                op.set_input(**inputs(args, kwargs))
                result = func(*args, **kwargs)
                op.set_output(result)
                return result

        return cast(F, wrapper)


@overload
def operation(fn: F, *, name: Optional[str] = None, propagate: bool = True, **attributes: Any) -> F: ...


@overload
def operation(
    fn: Optional[str] = None, *, name: Optional[str] = None, propagate: bool = True, **attributes: Any
) -> OperationContext: ...


def operation(
    fn: Union[Callable[..., Any], str, None] = None,
    *,
    name: Optional[str] = None,
    propagate: bool = True,
    **attributes: Any,
) -> Any:
    """Trace a function (`@operation`, `@operation(...)`, `operation(fn=func)`) or a block (`with operation("name"):`).

    `fn` is the function to wrap (v0.3 name of the argument); a string instead names the operation.
    """
    if callable(fn):
        return OperationContext(name, propagate=propagate, attributes=attributes)(fn)
    if fn is not None and not isinstance(fn, str):
        raise TypeError(f"operation() expects a function or an operation name, got {type(fn).__name__}")
    if isinstance(fn, str) and name is None:
        name = fn
    return OperationContext(name, propagate=propagate, attributes=attributes)
