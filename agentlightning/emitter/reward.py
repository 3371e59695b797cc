"""Rewards: `emit_reward`, the deprecated `@reward` decorator, and readers that find rewards in spans.

A reward span is named `agentlightning.reward` and carries one or more dimensions as
`agentlightning.reward.<i>.name|value` (dimension 0 is primary) plus the v0.2 attribute `reward` (the primary
value). The readers also understand v0.2 spans (`reward` attribute only) and AgentOps-style payloads
(`agentops.task.output` / `agentops.entity.output` holding `{"type": "reward", "value": v}` as a dict, JSON text or
Python-literal text).
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import logging
import math
import numbers
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Optional, TypeVar, Union, cast

from agentlightning.semconv import AGL_REWARD, LEGACY_REWARD_ATTRIBUTE, LightningSpanAttributes, RewardPydanticModel
from agentlightning.types import SpanCoreFields
from agentlightning.utils.otel import flatten_attributes

from .dispatch import emit_span

__all__ = [
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "reward",
]

logger = logging.getLogger("agentlightning.emitter")

F = TypeVar("F", bound=Callable[..., Any])

PRIMARY_REWARD_NAME = "primary"
_REWARD_PREFIX = LightningSpanAttributes.REWARD.value
_AGENTOPS_KEYS = ("agentops.task.output", "agentops.entity.output")


def _as_reward_number(value: Any, what: str) -> Optional[float]:
    """`value` as a finite float, or None after logging why it is not a valid reward."""
    if isinstance(value, numbers.Real) and not isinstance(value, complex):
        number = float(value)
        if math.isfinite(number):
            return number
        logger.error("%s must be a finite number, got %r; the reward is not recorded", what, value)
        return None
    logger.error(
        "%s must be a number (int, float or bool), got %s %r; the reward is not recorded",
        what,
        type(value).__name__,
        value,
    )
    return None


def _dimensions(
    reward: Union[float, Mapping[str, float]], primary_key: Optional[str]
) -> Optional[list[RewardPydanticModel]]:
    if isinstance(reward, Mapping):
        if not reward:
            logger.error("emit_reward got an empty reward dict; the reward is not recorded")
            return None
        if primary_key is None or primary_key not in reward:
            logger.error(
                "emit_reward with a dict needs primary_key naming one of its keys (got primary_key=%r, keys %s); "
                "the reward is not recorded",
                primary_key,
                list(reward),
            )
            return None
        dimensions: list[RewardPydanticModel] = []
        for key in [primary_key, *[k for k in reward if k != primary_key]]:
            if not isinstance(key, str):
                logger.error("Reward dimension names must be strings, got %r; the reward is not recorded", key)
                return None
            value = _as_reward_number(reward[key], f"Reward dimension {key!r}")
            if value is None:
                return None
            dimensions.append(RewardPydanticModel(name=key, value=value))
        return dimensions
    value = _as_reward_number(reward, "Reward")
    if value is None:
        return None
    return [RewardPydanticModel(name=primary_key or PRIMARY_REWARD_NAME, value=value)]


def reward_attributes(dimensions: list[RewardPydanticModel]) -> dict[str, Any]:
    """The span attributes that encode `dimensions` (v0.3 flattened form plus the v0.2 `reward` attribute)."""
    attributes: dict[str, Any] = {}
    for index, dimension in enumerate(dimensions):
        attributes[f"{_REWARD_PREFIX}.{index}.name"] = dimension.name
        attributes[f"{_REWARD_PREFIX}.{index}.value"] = dimension.value
    attributes[LEGACY_REWARD_ATTRIBUTE] = dimensions[0].value
    return attributes


def emit_reward(
    reward: Union[float, Mapping[str, float]],
    *,
    primary_key: Optional[str] = None,
    attributes: Optional[Mapping[str, Any]] = None,
    propagate: bool = True,
) -> Optional[SpanCoreFields]:
    """Record a reward span and return its fields.

    Args:
        reward: a number (int and bool are converted to float), or a dict of named dimensions.
        primary_key: with a dict, the dimension that is the primary reward (required); with a number, the name
            given to it (default "primary").
        attributes: extra attributes for the span (nested values are flattened).
        propagate: False only builds the span fields (for runners that store them themselves).

    Invalid rewards (not a number, NaN, infinite, dict without a valid primary_key) are logged as errors and nothing
    is recorded: the function returns None and the agent keeps running.
    """
    dimensions = _dimensions(reward, primary_key)
    if dimensions is None:
        return None
    span_attributes: dict[str, Any] = dict(flatten_attributes(attributes)) if attributes else {}
    span_attributes.update(reward_attributes(dimensions))
    return emit_span(AGL_REWARD, span_attributes, propagate=propagate)


def reward(fn: F) -> F:
    """Deprecated decorator: emit the (sync or async) function's return value as a reward and return it unchanged.

    Use `emit_reward` instead. A return value that is not a finite number is logged and no reward is recorded.
    """
    warnings.warn("@reward is deprecated; call emit_reward(value) instead", DeprecationWarning, stacklevel=2)

    if inspect.iscoroutinefunction(fn):
        async_fn = cast(Callable[..., Awaitable[Any]], fn)

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            result = await async_fn(*args, **kwargs)
            emit_reward(result)
            return result

        return cast(F, async_wrapper)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        emit_reward(result)
        return result

    return cast(F, wrapper)


# ----------------------------------------------------------------------------------------------------- readers
def _agentops_payload(attributes: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    for key in _AGENTOPS_KEYS:
        if key not in attributes:
            continue
        payload = attributes[key]
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except ValueError:
                try:  # LiteLLM records dicts with str(): a Python literal
                    payload = ast.literal_eval(payload)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    continue
        if isinstance(payload, dict) and payload.get("type") == "reward":  # type: ignore[union-attr]
            return cast(dict[str, Any], payload)
    return None


def _checked(value: Any, span: Any) -> Any:
    if value is not None and not isinstance(value, float):
        logger.error("Reward of span %r is not a float: %r", getattr(span, "name", None), value)
    return value


def get_reward_value(span: Any) -> Optional[float]:
    """The primary reward of `span` (anything with `.name` and `.attributes`), or None if it holds no reward.

    Looks at the v0.3 attributes first, then an AgentOps reward payload, then the v0.2 `reward` attribute of a span
    named `agentlightning.reward`. A non-float value is logged as an error and returned as it is.
    """
    attributes = getattr(span, "attributes", None) or {}
    primary = f"{_REWARD_PREFIX}.0.value"
    if primary in attributes:
        return _checked(attributes[primary], span)
    payload = _agentops_payload(attributes)
    if payload is not None:
        return _checked(payload.get("value"), span)
    if getattr(span, "name", None) == AGL_REWARD and attributes:
        return _checked(attributes.get(LEGACY_REWARD_ATTRIBUTE), span)
    return None


def get_rewards_from_span(span: Any) -> list[RewardPydanticModel]:
    """All reward dimensions of `span` (primary first); a v0.2 or AgentOps reward gives one "primary" dimension."""
    attributes = getattr(span, "attributes", None) or {}
    dimensions: list[RewardPydanticModel] = []
    index = 0
    while f"{_REWARD_PREFIX}.{index}.value" in attributes:
        name = attributes.get(f"{_REWARD_PREFIX}.{index}.name", str(index))
        value = attributes[f"{_REWARD_PREFIX}.{index}.value"]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            dimensions.append(RewardPydanticModel(name=str(name), value=float(value)))
        index += 1
    if dimensions:
        return dimensions
    value = get_reward_value(span)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [RewardPydanticModel(name=PRIMARY_REWARD_NAME, value=float(value))]
    return []


def is_reward_span(span: Any) -> bool:
    """True when `span` holds a (non-None) reward."""
    return get_reward_value(span) is not None


def find_reward_spans(spans: Iterable[Any]) -> list[Any]:
    """The reward spans among `spans`, in order."""
    return [span for span in spans if is_reward_span(span)]


def find_final_reward(spans: Iterable[Any]) -> Optional[float]:
    """The reward of the last reward span, or None when there is none."""
    for span in reversed(list(spans)):
        value = get_reward_value(span)
        if value is not None:
            return value
    return None
