"""Argument checks at the store's API edge. Each raises a typed error naming the offending value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

from pydantic import TypeAdapter, ValidationError

from agentlightning.store.core.lifecycle import ATTEMPT_STATUSES, ROLLOUT_STATUSES
from agentlightning.store.errors import InvalidArgumentError, InvalidArgumentTypeError
from agentlightning.types import (
    AttemptStatus,
    EnqueueRolloutRequest,
    NamedResources,
    Resource,
    RolloutConfig,
    RolloutMode,
    RolloutStatus,
    Span,
)

ROLLOUT_MODES: tuple[str, ...] = ("train", "val", "test")

_named_resources_adapter: Optional[TypeAdapter[Any]] = None


def check_id(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentTypeError(f"{name} must be a string, got {type(value).__name__}: {value!r}")
    if not value:
        raise InvalidArgumentError(f"{name} must not be empty")
    return value


def check_optional_id(value: Any, name: str) -> Optional[str]:
    return None if value is None else check_id(value, name)


def check_mode(mode: Any) -> Optional[RolloutMode]:
    if mode is not None and mode not in ROLLOUT_MODES:
        raise InvalidArgumentError(f"Invalid mode: {mode!r}, expected one of {', '.join(ROLLOUT_MODES)} or None")
    return mode


def check_rollout_status(status: Any) -> RolloutStatus:
    if status not in ROLLOUT_STATUSES:
        raise InvalidArgumentError(f"Invalid rollout status: {status!r}, expected one of {', '.join(ROLLOUT_STATUSES)}")
    return status


def check_attempt_status(status: Any) -> AttemptStatus:
    if status not in ATTEMPT_STATUSES:
        raise InvalidArgumentError(f"Invalid attempt status: {status!r}, expected one of {', '.join(ATTEMPT_STATUSES)}")
    return status


def check_status_list(
    values: Any, allowed: Sequence[str], name: str, noun: tuple[str, str] = ("status", "statuses")
) -> Optional[Sequence[str]]:
    """`values` as a list when each is one of `allowed`; `noun` (singular, plural) names them in errors."""
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidArgumentTypeError(f"{name} must be a list of {noun[1]}, got {values!r}")
    for value in values:
        if value not in allowed:
            raise InvalidArgumentError(f"Invalid {noun[0]} in {name}: {value!r}, expected one of {', '.join(allowed)}")
    return list(values)


def check_id_list(values: Any, name: str) -> Optional[Sequence[str]]:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidArgumentTypeError(f"{name} must be a list of ids, got {values!r}")
    for value in values:
        if not isinstance(value, str):
            raise InvalidArgumentTypeError(f"{name} must contain only strings, got {value!r}")
    return list(values)


def check_config(config: Any) -> RolloutConfig:
    """A private copy of the config (a fresh default for None). Dicts are validated into a RolloutConfig."""
    if config is None:
        return RolloutConfig()
    if isinstance(config, RolloutConfig):
        try:
            return RolloutConfig.model_validate(config.model_dump())
        except ValidationError as exc:
            raise InvalidArgumentError(f"Invalid rollout config: {exc}") from None
    if isinstance(config, dict):
        try:
            return RolloutConfig.model_validate(config)
        except ValidationError as exc:
            raise InvalidArgumentError(f"Invalid rollout config: {exc}") from None
    raise InvalidArgumentTypeError(f"config must be a RolloutConfig, got {type(config).__name__}: {config!r}")


def check_metadata(metadata: Any, name: str = "metadata") -> Optional[dict[str, Any]]:
    """A shallow copy of the metadata dict (None stays None)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise InvalidArgumentTypeError(f"{name} must be a dict, got {type(metadata).__name__}: {metadata!r}")
    return dict(metadata)


def check_timestamp(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgumentError(f"{name} must be a finite number of seconds, got {value!r}")
    return float(value)


def check_timeout(timeout: Any) -> Optional[float]:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout):
        raise InvalidArgumentError(f"timeout must be a number of seconds or None, got {timeout!r}")
    if timeout < 0:
        raise InvalidArgumentError(f"timeout must not be negative, got {timeout!r}")
    return float(timeout)


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidArgumentTypeError(f"limit must be an integer, got {limit!r}")
    return limit


def check_resources(resources: Any) -> NamedResources:
    """Validate a name -> resource mapping; dicts are parsed through the `resource_type` discriminator."""
    global _named_resources_adapter
    if not isinstance(resources, dict):
        raise InvalidArgumentTypeError(f"resources must be a dict of name -> resource, got {resources!r}")
    if all(isinstance(key, str) and isinstance(value, Resource) for key, value in resources.items()):
        return dict(resources)  # type: ignore[return-value]
    if _named_resources_adapter is None:
        _named_resources_adapter = TypeAdapter(NamedResources)
    try:
        return _named_resources_adapter.validate_python(
            {key: value.model_dump() if isinstance(value, Resource) else value for key, value in resources.items()}
        )
    except ValidationError as exc:
        raise InvalidArgumentError(f"Invalid resources: {exc}") from None


def check_span(span: Any) -> Span:
    if isinstance(span, Span):
        return span
    if isinstance(span, dict):
        try:
            return Span.model_validate(span)
        except ValidationError as exc:
            raise InvalidArgumentError(f"Invalid span: {exc}") from None
    raise InvalidArgumentTypeError(f"span must be a Span, got {type(span).__name__}: {span!r}")


def check_span_ids(span: Span) -> None:
    if not span.rollout_id or not span.attempt_id:
        raise InvalidArgumentError(
            f"Span {span.span_id!r} must name its rollout_id and attempt_id (got {span.rollout_id!r}, "
            f"{span.attempt_id!r})"
        )
    if not span.span_id:
        raise InvalidArgumentError(f"A span of rollout {span.rollout_id} has an empty span_id")


def check_enqueue_request(request: Any) -> EnqueueRolloutRequest:
    if isinstance(request, EnqueueRolloutRequest):
        return request
    if isinstance(request, dict):
        try:
            return EnqueueRolloutRequest.model_validate(request)
        except ValidationError as exc:
            raise InvalidArgumentError(f"Invalid enqueue request: {exc}") from None
    raise InvalidArgumentTypeError(f"Expected an EnqueueRolloutRequest, got {type(request).__name__}: {request!r}")
