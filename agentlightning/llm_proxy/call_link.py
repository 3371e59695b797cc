"""How a client-side LLM span and the proxy's record of the same call find each other (one record per call).

With client capture on and the calls going through the LLM proxy, each call is seen twice: the client's span (where
the call sits in the agent's trace, under its agent) and the proxy's span (the exact request sent upstream, the
answer, the token ids, failures). The proxy's span is the call's record; the client's span is marked, when it is
written, as a view of that record:

- the proxy answers every call it records with the header `x-request-id: agl-<span id of its record>` (the OpenAI
  SDK exposes it as `_request_id` / `request_id`);
- the client-side recorder (`agentlightning.instrumentation.token_ids`) sets `agentlightning.llm.via_proxy` (the
  proxy URL the call was sent to: a base URL with `/rollout/<id>/attempt/<id>`, or `x-rollout-id` headers) before the
  call, and `agentlightning.llm.proxy_span_id` (from that header) when the answer or error arrives.

Readers count a call once (`agentlightning.adapter.call_identity`): spans that share a response id, or a client span
and the proxy span it names, are one call. Stores written before these marks still pair by response id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Optional

__all__ = [
    "PROXY_REQUEST_ID_PREFIX",
    "PROXY_SPAN_ID",
    "REQUEST_ID_HEADER",
    "VIA_PROXY",
    "proxy_request_id",
    "proxy_span_id_from_request_id",
    "proxy_url_of",
]

REQUEST_ID_HEADER = "x-request-id"
PROXY_REQUEST_ID_PREFIX = "agl-"
VIA_PROXY = "agentlightning.llm.via_proxy"
"""Client span attribute: the LLM proxy URL the call was sent to (set before the call, so a call that never reached
the proxy says where it was going)."""
PROXY_SPAN_ID = "agentlightning.llm.proxy_span_id"
"""Client span attribute: the span id of the proxy's record of the same call."""

_PROXY_PATH = re.compile(r"^(.*?/rollout/[^/]+/attempt/[^/]+)(?:/|$)")


def proxy_request_id(span_id: str) -> str:
    """The `x-request-id` the proxy answers a call with: its record's span id, recognisably the proxy's."""
    return f"{PROXY_REQUEST_ID_PREFIX}{span_id}"


def proxy_span_id_from_request_id(request_id: Any) -> Optional[str]:
    """The proxy record's span id in an `x-request-id` value, or None for another server's request id."""
    if isinstance(request_id, str) and request_id.startswith(PROXY_REQUEST_ID_PREFIX):
        span_id = request_id[len(PROXY_REQUEST_ID_PREFIX) :]
        return span_id or None
    return None


def proxy_url_of(base_url: str, headers: Optional[Mapping[str, Any]] = None) -> Optional[str]:
    """The LLM proxy URL of a client whose base URL is `base_url` and which sends `headers`: the base URL up to
    `/rollout/<id>/attempt/<id>`, or the whole base URL when the headers carry `x-rollout-id` and `x-attempt-id`;
    None for a client that does not call the proxy."""
    match = _PROXY_PATH.match(base_url)
    if match:
        return match.group(1)
    if headers:
        names = {str(name).lower() for name in headers}
        if "x-rollout-id" in names and "x-attempt-id" in names:
            return base_url.rstrip("/")
    return None
