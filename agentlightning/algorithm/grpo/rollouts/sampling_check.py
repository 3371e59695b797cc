"""Did the agents sample the way the training assumes? A check of every call the LLM proxy recorded.

GRPO computes the log-probabilities of a response at the configured temperature over the whole vocabulary. A
response drawn at another temperature, or with top_p / top_k truncating the distribution, was drawn from another
distribution: its ratio and gradient are then wrong, silently. Agents receive the temperature in the `ProxyLLM`'s
`sampling_parameters`, but nothing forces them to pass it on, so each step counts the proxy's calls whose recorded
request differs (a request without a temperature samples at the server default, 1.0); the same calls, when trained
on, are left out of the loss (`call_checks`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

from agentlightning.types import Span

__all__ = ["PROXY_SERVICE_NAME", "SamplingMismatches", "SamplingRecord", "count_mismatches", "recorded_sampling"]

PROXY_SERVICE_NAME = "agentlightning.llm_proxy"
_DEFAULT_TEMPERATURE = 1.0  # the OpenAI API's default, and the local inference server's


@dataclass(frozen=True)
class SamplingRecord:
    """How one call recorded by the proxy sampled (None: the request did not say)."""

    temperature: Optional[float]
    top_p: Optional[float]
    top_k: Optional[int]


@dataclass
class SamplingMismatches:
    """Calls checked, and those that sampled otherwise than the training assumes."""

    calls: int = 0
    temperature: int = 0  # sampled at another temperature (no temperature sent counts as 1.0)
    top_p: int = 0  # top_p below 1
    top_k: int = 0  # top_k set (positive)

    @property
    def any(self) -> bool:
        return bool(self.temperature or self.top_p or self.top_k)

    def add(self, other: SamplingMismatches) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _number(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _top_k(request_json: Any) -> Optional[int]:
    if not isinstance(request_json, str) or '"top_k"' not in request_json:
        return None
    try:
        request = json.loads(request_json)
    except ValueError:
        return None
    value = request.get("top_k") if isinstance(request, dict) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def recorded_sampling(spans: Iterable[Span]) -> list[SamplingRecord]:
    """The sampling settings of every LLM call the proxy recorded among `spans`."""
    records: list[SamplingRecord] = []
    for span in spans:
        if span.resource.attributes.get("service.name") != PROXY_SERVICE_NAME:
            continue
        attributes = span.attributes
        if "gen_ai.request.model" not in attributes and "agentlightning.llm.request" not in attributes:
            continue
        records.append(
            SamplingRecord(
                temperature=_number(attributes.get("gen_ai.request.temperature")),
                top_p=_number(attributes.get("gen_ai.request.top_p")),
                top_k=_top_k(attributes.get("agentlightning.llm.request")),
            )
        )
    return records


def count_mismatches(records: Sequence[SamplingRecord], temperature: float) -> SamplingMismatches:
    """Count the calls of `records` that did not sample at `temperature` over the full distribution."""
    counts = SamplingMismatches(calls=len(records))
    for record in records:
        used = record.temperature if record.temperature is not None else _DEFAULT_TEMPERATURE
        if not math.isclose(used, temperature, rel_tol=1e-6, abs_tol=1e-9):
            counts.temperature += 1
        if record.top_p is not None and record.top_p < 1.0:
            counts.top_p += 1
        if record.top_k is not None and record.top_k > 0:
            counts.top_k += 1
    return counts
