"""Zero-code capture of LangChain and LangGraph runs (chains, graph nodes, tools, chat models).

Uses the OpenInference LangChain instrumentor. LLM calls made by `langchain-openai` go through the OpenAI SDK, so
their token ids are recorded on the nested OpenAI span (`instrument_openai`); LangGraph node spans are named after
the node and carry `agent.name`, which `agent_match` selects on (see `mapping` for graphs given a name).

**Why the SDK span needs help to find its parent.** The LangChain instrumentor creates its spans from LangChain's
callbacks and, on purpose, never makes them current (a callback that fails could leave a context attached for
good). The OpenAI SDK call that a chat model makes therefore starts its span in a context without the chat model's
span, and it became a root of a trace of its own: the model call showed up twice (the chat model's span without
token ids, and an orphan SDK span with them). While a chat model runs, `parent_sdk_calls` makes the chat model's
span current around the code that calls the provider, and only there, with the detach in a `finally` of the same
call, so nothing can stay attached:
- `BaseChatModel._generate_with_cache` / `_agenerate_with_cache` (invoke, batch, LangGraph nodes; streaming done
  inside an invoke) get the run's id from their `run_manager`;
- `BaseChatModel.stream` / `astream` start the run inside the stream: the run's span is made current from the
  moment `on_chat_model_start` returns until the end of each step of the stream.
Text-completion models (`BaseLLM`) batch several prompts into one run and are left as they are.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterator
from typing import Any, Optional

from ._openinference import activate, deactivate

__all__ = ["instrument_langchain", "parent_sdk_calls", "uninstrument_langchain", "unparent_sdk_calls"]

INSTRUMENTOR = "openinference.instrumentation.langchain.LangChainInstrumentor"
_CHAT_MODELS = "langchain_core.language_models.chat_models"
_CALLBACKS = "langchain_core.callbacks.manager"

_stream_step: contextvars.ContextVar[Optional[_StreamStep]] = contextvars.ContextVar(
    "agl_langchain_stream_step", default=None
)
"""The step of a wrapped stream that is running in this context, if any."""

_installed = False


def instrument_langchain() -> bool:
    """Turn the LangChain instrumentor on (idempotent) and parent SDK spans under chat model spans.

    Raises ImportError naming the extra when the instrumentor is not installed.
    """
    active = activate(INSTRUMENTOR, "langchain")
    parent_sdk_calls()
    return active


def uninstrument_langchain() -> None:
    """Turn the LangChain instrumentor and the SDK-span parenting off."""
    unparent_sdk_calls()
    deactivate(INSTRUMENTOR)


def _run_span(run_id: Any) -> Any:
    """The OpenInference span of the LangChain run `run_id`, or None."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    if run_id is None or not instrumentor.is_instrumented_by_opentelemetry:
        return None
    tracer = getattr(instrumentor, "_tracer", None)
    return tracer.get_span(run_id) if tracer is not None else None


def _attach(run_id: Any) -> Optional[object]:
    """Make the span of run `run_id` current (in the current context); the token to detach, or None."""
    span = _run_span(run_id)
    if span is None:
        return None
    from opentelemetry import context, trace

    return context.attach(trace.set_span_in_context(span))


def _detach(token: Optional[object]) -> None:
    if token is not None:
        from opentelemetry import context

        context.detach(token)  # type: ignore[arg-type]


def _run_id(kwargs: dict[str, Any]) -> Any:
    run_manager = kwargs.get("run_manager")
    return getattr(run_manager, "run_id", None)


def _generate_with_cache(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    token = _attach(_run_id(kwargs))
    try:
        return wrapped(*args, **kwargs)
    finally:
        _detach(token)


async def _agenerate_with_cache(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    token = _attach(_run_id(kwargs))
    try:
        return await wrapped(*args, **kwargs)
    finally:
        _detach(token)


def _remember(run_managers: Any) -> None:
    """Inside a stream's step: the run just started is the stream's; its span is current until the step ends."""
    step = _stream_step.get()
    if step is None or not isinstance(run_managers, list) or len(run_managers) != 1:  # type: ignore[arg-type]
        return
    step.started(getattr(run_managers[0], "run_id", None))


def _on_chat_model_start(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    run_managers = wrapped(*args, **kwargs)
    _remember(run_managers)
    return run_managers


async def _aon_chat_model_start(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    run_managers = await wrapped(*args, **kwargs)
    _remember(run_managers)
    return run_managers


class _StreamStep:
    """One step of a wrapped stream: the stream's run span, once known, is current during the step and only then.

    `run` (shared by the steps of one stream) holds the id of the run the stream started.
    """

    def __init__(self, run: list[Any]) -> None:
        self.run = run
        self.tokens: list[object] = []
        self.reset: Optional[contextvars.Token[Optional[_StreamStep]]] = None

    def started(self, run_id: Any) -> None:
        if self.run or run_id is None:
            return  # a nested run (a model called by a callback): the stream's own run came first
        self.run.append(run_id)
        self._attach(run_id)

    def _attach(self, run_id: Any) -> None:
        token = _attach(run_id)
        if token is not None:
            self.tokens.append(token)

    def __enter__(self) -> None:
        if self.run:
            self._attach(self.run[0])
        self.reset = _stream_step.set(self)

    def __exit__(self, *exc: object) -> None:
        if self.reset is not None:
            _stream_step.reset(self.reset)
        for token in reversed(self.tokens):
            _detach(token)
        self.tokens.clear()


def _stream(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Iterator[Any]:
    inner = wrapped(*args, **kwargs)
    run: list[Any] = []

    def steps() -> Iterator[Any]:
        try:
            while True:
                with _StreamStep(run):
                    try:
                        item = next(inner)
                    except StopIteration:
                        return
                yield item
        finally:
            inner.close()

    return steps()


def _astream(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> AsyncIterator[Any]:
    inner = wrapped(*args, **kwargs)
    run: list[Any] = []

    async def steps() -> AsyncIterator[Any]:
        try:
            while True:
                with _StreamStep(run):
                    try:
                        item = await inner.__anext__()
                    except StopAsyncIteration:
                        return
                yield item
        finally:
            await inner.aclose()

    return steps()


_WRAPPERS: tuple[tuple[str, str, Any], ...] = (
    (_CHAT_MODELS, "BaseChatModel._generate_with_cache", _generate_with_cache),
    (_CHAT_MODELS, "BaseChatModel._agenerate_with_cache", _agenerate_with_cache),
    (_CHAT_MODELS, "BaseChatModel.stream", _stream),
    (_CHAT_MODELS, "BaseChatModel.astream", _astream),
    (_CALLBACKS, "CallbackManager.on_chat_model_start", _on_chat_model_start),
    (_CALLBACKS, "AsyncCallbackManager.on_chat_model_start", _aon_chat_model_start),
)


def parent_sdk_calls() -> None:
    """Make a chat model's span current while it calls its provider (idempotent; see the module docstring)."""
    global _installed
    if _installed:
        return
    from wrapt import wrap_function_wrapper

    for module, name, wrapper in _WRAPPERS:
        wrap_function_wrapper(module, name, wrapper)
    _installed = True


def unparent_sdk_calls() -> None:
    """Undo `parent_sdk_calls`."""
    global _installed
    if not _installed:
        return
    import importlib

    from opentelemetry.instrumentation.utils import unwrap

    for module, name, _ in _WRAPPERS:
        owner, _, attribute = name.partition(".")
        unwrap(getattr(importlib.import_module(module), owner), attribute)
    _installed = False
