"""Ask OpenAI-compatible servers for token ids, and record the ids they return on the LLM span of the call.

**Asking.** Training needs the exact token ids the server used; vLLM returns them only when the request says
`return_token_ids: true`. So that unchanged agents are trainable, this module adds that field to every chat
completions and completions request made through the OpenAI SDK while a trace context is open (the same rule that
attributes spans to a rollout: `agentlightning.tracer.processor.current_trace_scope`). It works at the transport
level (`OpenAI.request` / `AsyncOpenAI.request`), so it also covers frameworks that call the SDK for the agent and
drop `extra_body` (AutoGen's `OpenAIChatCompletionClient`), LangChain/LangGraph, the OpenAI Agents SDK and LiteLLM's
OpenAI provider (CrewAI). It is not added when the request already sets the field (in the body or `extra_body`), for
OpenAI's own API (`api.openai.com`, Azure OpenAI), or when turned off: `OtelTracer(request_token_ids=False)` for a
tracer, `AGL_REQUEST_TOKEN_IDS=0` for the process. A server that rejects the field (decided from the error's
structure, see `agentlightning.llm_proxy.token_id_support`) gets the request again without it, is not asked for a
while, and a warning says capture is off for it. Responses API calls (`/responses`, the OpenAI Agents SDK's default
model) are asked too; whether a server knows the field there is remembered apart from its chat completions.

**Recording.** vLLM (with `return_token_ids`) and Agent Lightning's inference server return `prompt_token_ids` at the
top level of a chat completion and `token_ids` in each choice; vLLM's `/v1/completions` puts `prompt_token_ids`
inside each choice (streamed: in the first chunk's choice). The wrapper sits *inside* the OpenInference
instrumentor's wrapper, so the instrumentor's LLM span is current while the request runs, and it adds to it

- `prompt_token_ids` and `response_token_ids` (first choice) as compact JSON text on the live span (cheap to set);
  stored spans carry them as lists of ints (decoded by `agentlightning.tracer.convert`),
- `gen_ai.response.id`,
- `logprobs.content` (JSON text of the first choice's per-token logprobs) when the server returned them.

A Responses API answer carries `prompt_token_ids` and `output_token_ids` at its top level (Agent Lightning's server;
streamed: on the terminal event's response). Older response shapes are read too: `choices[0].provider_specific_fields["token_ids"]` (LiteLLM) and
`response_token_ids[0]` (v0.2 patched vLLM). Streams are observed in place (the stream object keeps its type), so
streaming consumers see no difference.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Optional
from urllib.parse import urlsplit

from agentlightning.env_var import LightningEnvVar, resolve_bool_env_var
from agentlightning.llm_proxy.call_link import (
    PROXY_SPAN_ID,
    REQUEST_ID_HEADER,
    VIA_PROXY,
    proxy_span_id_from_request_id,
    proxy_url_of,
)
from agentlightning.llm_proxy.token_id_support import FIELD, TokenIdSupport, rejects_return_token_ids

__all__ = [
    "install_token_id_recorder",
    "is_installed",
    "token_id_support",
    "uninstall_token_id_recorder",
]

logger = logging.getLogger(__name__)

_MARK = "_agl_token_ids"
_originals: dict[type, Optional[Any]] = {}

_support = TokenIdSupport(what="Zero-code capture")
_ENDPOINT = re.compile(r"(?:^|/)(?:(?:chat/)?completions|responses)/?$")
_RESPONSES_ENDPOINT = re.compile(r"(?:^|/)responses/?$")
_TERMINAL_RESPONSE_EVENTS = frozenset({"response.completed", "response.incomplete"})
_warned_env = False


def token_id_support() -> TokenIdSupport:
    """Which servers refused `return_token_ids` (and when they are asked again), process-wide."""
    return _support


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
        completion = _int_list(_extra(response, "output_token_ids"))  # the Responses API
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
            if getattr(chunk, "type", None) in _TERMINAL_RESPONSE_EVENTS:  # a Responses API stream ends here
                self._observe_response(getattr(chunk, "response", None))
                return
            if self.response_id is None and isinstance(getattr(chunk, "id", None), str):
                self.response_id = chunk.id
            if self.prompt is None:
                self.prompt = _int_list(_extra(chunk, "prompt_token_ids"))
            for choice in getattr(chunk, "choices", None) or []:
                if getattr(choice, "index", 0) != 0:
                    continue
                if self.prompt is None:  # vLLM completions: in the first chunk's choice
                    self.prompt = _int_list(_extra(choice, "prompt_token_ids"))
                ids = _int_list(_extra(choice, "token_ids"))
                if ids is not None:
                    self.saw_completion_ids = True
                    self.completion.extend(ids)
        except Exception:
            logger.debug("Could not read token ids from a stream chunk", exc_info=True)

    def _observe_response(self, response: Any) -> None:
        if response is None:
            return
        if isinstance(getattr(response, "id", None), str):
            self.response_id = response.id
        prompt, completion = _ids_from_response(response)
        self.prompt = prompt if prompt is not None else self.prompt
        if completion is not None:
            self.saw_completion_ids = True
            self.completion = list(completion)

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


def _requests_wanted() -> bool:
    """Whether calls made here should ask for token ids (a trace context is open and it wants them)."""
    global _warned_env
    from agentlightning.tracer.processor import current_trace_scope

    scope = current_trace_scope()
    if scope is None or not getattr(scope.owner, "request_token_ids", False):
        return False
    try:
        return resolve_bool_env_var(LightningEnvVar.AGL_REQUEST_TOKEN_IDS, fallback=True)
    except ValueError as exc:
        if not _warned_env:
            _warned_env = True
            logger.warning("%s; token ids are requested (the default)", exc)
        return True


def _is_openai_api(host: str) -> bool:
    return host == "api.openai.com" or host.endswith(".openai.azure.com")


def _add_token_id_request(client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[tuple[Any, str]]:
    """The request options with `return_token_ids: true` added, and the server's key; None to send them unchanged."""
    options = args[1] if len(args) > 1 else kwargs.get("options")
    if options is None or str(getattr(options, "method", "")).lower() != "post" or not _requests_wanted():
        return None
    url = str(getattr(options, "url", ""))
    if not _ENDPOINT.search(urlsplit(url).path if "://" in url else url.split("?")[0]):
        return None
    body = getattr(options, "json_data", None)
    extra = getattr(options, "extra_json", None)
    if not isinstance(body, Mapping) or FIELD in body or (isinstance(extra, Mapping) and FIELD in extra):
        return None
    base_url = getattr(client, "base_url", None)
    host = str(getattr(base_url, "host", "") or "")
    server = str(base_url)
    if _RESPONSES_ENDPOINT.search(url.split("?")[0]):
        server += " (Responses API)"  # a server may know the field on chat completions only
    if _is_openai_api(host) or not _support.wanted(server):
        return None
    updated = options.model_copy()
    updated.json_data = {**body, FIELD: True}
    return updated, server


def _with_options(
    args: tuple[Any, ...], kwargs: dict[str, Any], options: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if len(args) > 1:
        return (args[0], options, *args[2:]), kwargs
    return args, {**kwargs, "options": options}


def _refused(exc: BaseException) -> Optional[str]:
    """The error text when `exc` is a server's rejection of `return_token_ids`, else None."""
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None)
    if response is None or not isinstance(status, int):
        return None
    try:
        content = response.content
    except Exception:
        return None
    if not rejects_return_token_ids(status, content):
        return None
    return bytes(content).decode("utf-8", "replace")


def _mark_via_proxy(span: Any, client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Set `agentlightning.llm.via_proxy` on the span of a call sent to the LLM proxy (see `llm_proxy.call_link`);
    True when it was."""
    try:
        options = args[1] if len(args) > 1 else kwargs.get("options")
        headers: dict[str, Any] = dict(getattr(client, "default_headers", None) or {})
        extra = getattr(options, "headers", None)
        if isinstance(extra, Mapping):
            headers.update(extra)  # type: ignore[arg-type]
        url = proxy_url_of(str(getattr(client, "base_url", "")), headers)
        if url is not None and span.is_recording():
            span.set_attribute(VIA_PROXY, url)
            return True
    except Exception:  # never break the agent's call
        logger.debug("Could not tell whether a call goes through the LLM proxy", exc_info=True)
    return False


def _request_id_of(response: Any) -> Optional[str]:
    """The `x-request-id` a response (or an API error) came with: an SDK error's `request_id`, a parsed object's
    `_request_id`, or a stream's (or raw response's) headers."""
    for name in ("request_id", "_request_id"):
        value = getattr(response, name, None)
        if isinstance(value, str):
            return value
    http = getattr(response, "response", None) if not hasattr(response, "headers") else response
    headers = getattr(http, "headers", None)
    try:
        value = headers.get(REQUEST_ID_HEADER) if headers is not None else None
    except Exception:
        return None
    return value if isinstance(value, str) else None


def _link_proxy_record(span: Any, response: Any) -> None:
    """Name the proxy's record of the call (`agentlightning.llm.proxy_span_id`) on its client span."""
    span_id = proxy_span_id_from_request_id(_request_id_of(response))
    if span_id is not None and span.is_recording():
        span.set_attribute(PROXY_SPAN_ID, span_id)


def _wrap_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        span = _current_llm_span()
        via_proxy = span is not None and _mark_via_proxy(span, self, args, kwargs)
        added = _add_token_id_request(self, args, kwargs)
        try:
            if added is None:
                response = original(self, *args, **kwargs)
            else:
                try:
                    new_args, new_kwargs = _with_options(args, kwargs, added[0])
                    response = original(self, *new_args, **new_kwargs)
                except Exception as exc:
                    detail = _refused(exc)
                    if detail is None:
                        raise
                    _support.rejected(added[1], detail)
                    response = original(self, *args, **kwargs)
                else:
                    _support.accepted(added[1])
        except Exception as exc:
            if via_proxy:
                _link_proxy_record(span, exc)
            raise
        if via_proxy:
            _link_proxy_record(span, response)
        return _observe(span, response) if span is not None else response

    setattr(request, _MARK, True)
    return request


def _wrap_async(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        span = _current_llm_span()
        via_proxy = span is not None and _mark_via_proxy(span, self, args, kwargs)
        added = _add_token_id_request(self, args, kwargs)
        try:
            if added is None:
                response = await original(self, *args, **kwargs)
            else:
                new_args, new_kwargs = _with_options(args, kwargs, added[0])
                try:
                    response = await original(self, *new_args, **new_kwargs)
                except Exception as exc:
                    detail = _refused(exc)
                    if detail is None:
                        raise
                    _support.rejected(added[1], detail)
                    response = await original(self, *args, **kwargs)
                else:
                    _support.accepted(added[1])
        except Exception as exc:
            if via_proxy:
                _link_proxy_record(span, exc)
            raise
        if via_proxy:
            _link_proxy_record(span, response)
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
