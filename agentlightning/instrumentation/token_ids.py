"""Record the token ids an OpenAI-compatible server returns on the LLM span of the call.

vLLM (with `return_token_ids`) and Agent Lightning's own inference server return `prompt_token_ids` at the top level
of a chat completion and `token_ids` in each choice; streamed responses carry `prompt_token_ids` in the first chunk
and `token_ids` in every chunk. The OpenInference instrumentor does not record them, so this module wraps
`OpenAI.request` / `AsyncOpenAI.request` *inside* the instrumentor's wrapper: the instrumentor's LLM span is the
current span while the request runs, and the wrapper adds to it

- `prompt_token_ids` and `response_token_ids` (first choice) as compact JSON text on the live span (cheap to set);
  stored spans carry them as lists of ints (decoded by `agentlightning.tracer.convert`),
- `gen_ai.response.id`,
- `logprobs.content` (JSON text of the first choice's per-token logprobs) when the server returned them.

Older response shapes are read too: `choices[0].provider_specific_fields["token_ids"]` (LiteLLM),
`response_token_ids[0]` (v0.2 patched vLLM) and `choices[0].prompt_token_ids` (vLLM completions API).
Streams are observed in place (the stream object keeps its type), so streaming consumers see no difference.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Optional

__all__ = ["install_token_id_recorder", "is_installed", "uninstall_token_id_recorder"]

logger = logging.getLogger(__name__)

_MARK = "_agl_token_ids"
_originals: dict[type, Optional[Any]] = {}


def _int_list(value: Any) -> Optional[list[int]]:
    """`value` if it looks like a list of token ids (ends checked; OpenTelemetry validates every element)."""
    if isinstance(value, (list, tuple)) and (not value or (type(value[0]) is int and type(value[-1]) is int)):
        return value if isinstance(value, list) else list(value)  # type: ignore[return-value]
    return None


def _encode(ids: list[int]) -> str:
    # JSON text instead of a list: OpenTelemetry validates list attributes element by element on the agent's thread,
    # which costs ~0.1 ms per thousand tokens. The writer decodes it back into a list when the span is stored.
    return json.dumps(ids, separators=(",", ":"))


def _extra(obj: Any, name: str) -> Any:
    """An attribute of an OpenAI pydantic object, including fields the SDK does not declare."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, dict):
            value = extra.get(name)  # type: ignore[union-attr]
    return value


def _current_llm_span() -> Any:
    from opentelemetry import trace as trace_api

    span = trace_api.get_current_span()
    if not span.is_recording():
        return None
    attributes = getattr(span, "attributes", None)
    if attributes is None or attributes.get("openinference.span.kind") != "LLM":
        return None
    return span


def _ids_from_response(response: Any) -> tuple[Optional[list[int]], Optional[list[int]]]:
    choices = getattr(response, "choices", None) or []
    first = choices[0] if choices else None
    prompt = _int_list(_extra(response, "prompt_token_ids"))
    if prompt is None and first is not None:
        prompt = _int_list(_extra(first, "prompt_token_ids"))
    completion = _int_list(_extra(first, "token_ids")) if first is not None else None
    if completion is None and first is not None:
        fields = _extra(first, "provider_specific_fields")
        if isinstance(fields, dict):
            completion = _int_list(fields.get("token_ids"))  # type: ignore[union-attr]
    if completion is None:
        legacy = _extra(response, "response_token_ids")
        if isinstance(legacy, (list, tuple)) and legacy:
            completion = _int_list(legacy[0])
    return prompt, completion


def _logprobs_json(response: Any) -> Optional[str]:
    choices = getattr(response, "choices", None) or []
    logprobs = getattr(choices[0], "logprobs", None) if choices else None
    content = getattr(logprobs, "content", None) if logprobs is not None else None
    if not content:
        return None
    try:
        return json.dumps([item.model_dump() if hasattr(item, "model_dump") else item for item in content])
    except (TypeError, ValueError):
        return None


def _record_response(span: Any, response: Any) -> None:
    if not span.is_recording():
        return
    try:
        prompt, completion = _ids_from_response(response)
        response_id = getattr(response, "id", None)
        if isinstance(response_id, str):
            span.set_attribute("gen_ai.response.id", response_id)
        if prompt is not None:
            span.set_attribute("prompt_token_ids", _encode(prompt))
        if completion is not None:
            span.set_attribute("response_token_ids", _encode(completion))
        logprobs = _logprobs_json(response)
        if logprobs is not None:
            span.set_attribute("logprobs.content", logprobs)
    except Exception:  # never break the agent's call
        logger.debug("Could not record token ids", exc_info=True)


class _StreamRecorder:
    """Accumulates ids across streamed chunks and writes them on the span when the stream ends."""

    def __init__(self, span: Any) -> None:
        self.span = span
        self.response_id: Optional[str] = None
        self.prompt: Optional[list[int]] = None
        self.completion: list[int] = []
        self.saw_completion_ids = False

    def observe(self, chunk: Any) -> None:
        try:
            if self.response_id is None and isinstance(getattr(chunk, "id", None), str):
                self.response_id = chunk.id
            if self.prompt is None:
                self.prompt = _int_list(_extra(chunk, "prompt_token_ids"))
            for choice in getattr(chunk, "choices", None) or []:
                if getattr(choice, "index", 0) != 0:
                    continue
                ids = _int_list(_extra(choice, "token_ids"))
                if ids is not None:
                    self.saw_completion_ids = True
                    self.completion.extend(ids)
        except Exception:
            logger.debug("Could not read token ids from a stream chunk", exc_info=True)

    def finish(self) -> None:
        span = self.span
        if not span.is_recording():
            return
        if self.response_id is not None:
            span.set_attribute("gen_ai.response.id", self.response_id)
        if self.prompt is not None:
            span.set_attribute("prompt_token_ids", _encode(self.prompt))
        if self.saw_completion_ids:
            span.set_attribute("response_token_ids", _encode(self.completion))


def _tap_sync(iterator: Iterator[Any], recorder: _StreamRecorder) -> Iterator[Any]:
    try:
        for chunk in iterator:
            recorder.observe(chunk)
            yield chunk
    finally:
        recorder.finish()


async def _tap_async(iterator: AsyncIterator[Any], recorder: _StreamRecorder) -> AsyncIterator[Any]:
    try:
        async for chunk in iterator:
            recorder.observe(chunk)
            yield chunk
    finally:
        recorder.finish()


def _observe(span: Any, response: Any) -> Any:
    """Record ids of `response` (or arrange to record them as its stream is consumed); returns `response`."""
    import openai

    parsed = response
    if not isinstance(response, (openai.Stream, openai.AsyncStream)) and callable(getattr(response, "parse", None)):
        try:
            parsed = response.parse()  # raw-response wrappers cache the parsed value
        except Exception:
            logger.debug("Could not parse a raw response for token ids", exc_info=True)
            return response
    if isinstance(parsed, openai.Stream):
        parsed._iterator = _tap_sync(parsed._iterator, _StreamRecorder(span))  # pyright: ignore[reportPrivateUsage]
    elif isinstance(parsed, openai.AsyncStream):
        parsed._iterator = _tap_async(parsed._iterator, _StreamRecorder(span))  # pyright: ignore[reportPrivateUsage]
    else:
        _record_response(span, parsed)
    return response


def _wrap_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        span = _current_llm_span()
        response = original(self, *args, **kwargs)
        return _observe(span, response) if span is not None else response

    setattr(request, _MARK, True)
    return request


def _wrap_async(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        span = _current_llm_span()
        response = await original(self, *args, **kwargs)
        return _observe(span, response) if span is not None else response

    setattr(request, _MARK, True)
    return request


def is_installed() -> bool:
    return bool(_originals)


def install_token_id_recorder() -> None:
    """Wrap `OpenAI.request` and `AsyncOpenAI.request` (idempotent). Must run before the OpenAI instrumentor."""
    import openai

    for cls, wrap in ((openai.OpenAI, _wrap_sync), (openai.AsyncOpenAI, _wrap_async)):
        current = cls.request
        if getattr(current, _MARK, False):
            continue
        _originals[cls] = cls.__dict__.get("request")
        cls.request = wrap(current)  # type: ignore[method-assign]


def uninstall_token_id_recorder() -> None:
    """Restore the original request methods."""
    for cls, original in list(_originals.items()):
        if original is None:
            if "request" in cls.__dict__:
                delattr(cls, "request")
        else:
            cls.request = original  # type: ignore[attr-defined]
        del _originals[cls]
