"""What the LLM proxy recorded about each call a rollout trains on: the sampler's per-token log-probs, who served it,
how it sampled and why it stopped.

The calls GRPO trains on come from the adapter (client-side spans) or from the proxy's own spans; either way the
proxy's span of the same call (matched by the response id, else by the exact prompt and response ids) holds:
`logprobs.content` (one entry per generated token when the upstream returned log-probs; GRPO's proxy asks for them on
every call), `gen_ai.completion.0.finish_reason`, `gen_ai.request.{temperature,top_p}` and the request sent upstream
(`agentlightning.llm.request`: its `model` is the model or adapter that served the call, its `top_k`). A call whose
proxy span is missing has no record (None): it is trained without a sampler log-prob and nothing is checked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from agentlightning.adapter.attributes import parse_literal, token_id_list
from agentlightning.types import Span, Triplet

from .sampling_check import PROXY_SERVICE_NAME

__all__ = ["ProxyCall", "ProxyCallIndex", "call_record", "index_proxy_calls", "logprob_values"]


@dataclass(frozen=True)
class ProxyCall:
    """One call as the proxy recorded it (None: not recorded)."""

    response_id: Optional[str] = None
    prompt_ids: tuple[int, ...] = ()
    response_ids: tuple[int, ...] = ()
    logprobs: Optional[tuple[float, ...]] = None  # one per response id, else None
    finish_reason: Optional[str] = None
    requested_model: Optional[str] = None  # the name the agent called
    served_model: Optional[str] = None  # the upstream model (or adapter) the proxy sent the call to
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    top_k: Optional[int] = None


def _number(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def logprob_values(entries: Any, length: int) -> Optional[tuple[float, ...]]:
    """The `logprob` of each entry of an OpenAI `logprobs.content` list (JSON text or list), when there is exactly
    one finite value per generated token (`length`); None otherwise (absent, partial or malformed: not guessed)."""
    if isinstance(entries, str):
        try:
            entries = json.loads(entries)
        except ValueError:
            return None
    if not isinstance(entries, list) or len(entries) != length or not entries:
        return None
    values: list[float] = []
    for entry in entries:  # pyright: ignore[reportUnknownVariableType]
        value = _number(entry.get("logprob")) if isinstance(entry, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        if value is None or value > 0:
            return None
        values.append(value)
    return tuple(values)


def _request(attributes: dict[str, Any]) -> dict[str, Any]:
    raw = attributes.get("agentlightning.llm.request")
    if not isinstance(raw, str):
        return {}
    try:
        request = json.loads(raw)
    except ValueError:
        return {}
    return request if isinstance(request, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def call_record(span: Span) -> Optional[ProxyCall]:
    """The call the proxy span `span` records (None: not a proxy span of a call with token ids)."""
    if span.resource.attributes.get("service.name") != PROXY_SERVICE_NAME:
        return None
    attributes = span.attributes
    response_ids = token_id_list(attributes.get("response_token_ids")) or []
    if not response_ids:
        return None
    request = _request(attributes)
    top_k = request.get("top_k")
    served = request.get("model")
    response_id = attributes.get("gen_ai.response.id")
    finish = attributes.get("gen_ai.completion.0.finish_reason")
    return ProxyCall(
        response_id=str(response_id) if response_id else None,
        prompt_ids=tuple(token_id_list(attributes.get("prompt_token_ids")) or ()),
        response_ids=tuple(response_ids),
        logprobs=logprob_values(attributes.get("logprobs.content"), len(response_ids)),
        finish_reason=str(finish) if finish is not None else None,
        requested_model=str(attributes["gen_ai.request.model"]) if attributes.get("gen_ai.request.model") else None,
        served_model=served if isinstance(served, str) else None,
        temperature=_number(attributes.get("gen_ai.request.temperature")),
        top_p=_number(attributes.get("gen_ai.request.top_p")),
        top_k=top_k if isinstance(top_k, int) and not isinstance(top_k, bool) else None,
    )


class ProxyCallIndex:
    """The proxy's records of one rollout, looked up by a trained call (`lookup`)."""

    def __init__(self, records: Iterable[ProxyCall]) -> None:
        self.by_response_id: dict[str, ProxyCall] = {}
        self.by_ids: dict[tuple[tuple[int, ...], tuple[int, ...]], ProxyCall] = {}
        for record in records:
            if record.response_id is not None:
                self.by_response_id.setdefault(record.response_id, record)
            self.by_ids.setdefault((record.prompt_ids, record.response_ids), record)

    def __len__(self) -> int:
        return len(self.by_ids)

    def lookup(self, call: Triplet) -> Optional[ProxyCall]:
        """The record of `call`: by its response id, else by its exact prompt and response ids (None: none)."""
        response_id = call.metadata.get("response_id") if isinstance(call.metadata, dict) else None
        if response_id and str(response_id) in self.by_response_id:
            return self.by_response_id[str(response_id)]
        prompt = tuple(int(t) for t in call.prompt.get("token_ids") or ())
        response = tuple(int(t) for t in call.response.get("token_ids") or ())
        return self.by_ids.get((prompt, response))

    def records_for(self, calls: Sequence[Triplet]) -> list[Optional[ProxyCall]]:
        """The record of each of `calls`, in order; a call without a proxy span keeps the log-probs its own triplet
        carries (client-side spans with `logprobs.content`), as a record with nothing else."""
        records: list[Optional[ProxyCall]] = []
        for call in calls:
            record = self.lookup(call)
            if record is None:
                response = call.response.get("token_ids") or []
                own = logprob_values(parse_literal(call.response.get("logprobs")), len(response))
                record = ProxyCall(logprobs=own) if own is not None else None
            records.append(record)
        return records


def index_proxy_calls(spans: Iterable[Span]) -> ProxyCallIndex:
    """The index of every call the proxy recorded among `spans`."""
    return ProxyCallIndex(record for record in (call_record(span) for span in spans) if record is not None)
