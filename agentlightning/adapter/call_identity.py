"""One LLM call, however many spans record it: the client's span and the LLM proxy's span of the same call are one.

Two spans are the same call when they carry the same `gen_ai.response.id` (both recorders write the upstream's
response id; stores written before the proxy's link marks pair this way), or when a client span names the proxy
record (`agentlightning.llm.proxy_span_id`, see `agentlightning.llm_proxy.call_link`), which also pairs failed calls
that have no response id. Pure functions over spans.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentlightning.llm_proxy.call_link import PROXY_SPAN_ID
from agentlightning.types import Span

__all__ = ["count_llm_calls", "group_llm_calls"]


def _keys(span: Span) -> list[str]:
    attributes = span.attributes
    keys = [f"span:{span.span_id}"]
    response_id = attributes.get("gen_ai.response.id")
    if isinstance(response_id, str) and response_id:
        keys.append(f"response:{response_id}")
    linked = attributes.get(PROXY_SPAN_ID)
    if isinstance(linked, str) and linked:
        keys.append(f"span:{linked}")
    return keys


def group_llm_calls(spans: Sequence[Span]) -> list[list[Span]]:
    """The LLM-call spans `spans` grouped by call (each group in the given order; groups by their first span)."""
    parent: dict[int, int] = {}

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    owner: dict[str, int] = {}
    for index, span in enumerate(spans):
        parent[index] = index
        for key in _keys(span):
            if key in owner:
                first, second = root(owner[key]), root(index)
                if first != second:
                    parent[max(first, second)] = min(first, second)
            else:
                owner[key] = index
    groups: dict[int, list[Span]] = {}
    for index, span in enumerate(spans):
        groups.setdefault(root(index), []).append(span)
    return [groups[key] for key in sorted(groups)]


def count_llm_calls(spans: Sequence[Span]) -> int:
    """How many distinct LLM calls the LLM-call spans `spans` record."""
    return len(group_llm_calls(spans))
