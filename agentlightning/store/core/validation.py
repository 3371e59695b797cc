"""Argument checks at the store's API edge. Each raises a typed error naming the offending value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

from pydantic import BaseModel, TypeAdapter, ValidationError

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

MAX_STORED_INTEGER = 2**63 - 1
"""The largest integer the databases store (a signed 64-bit BIGINT): larger limits and offsets are refused."""
MAX_SPAN_SEQUENCE_ID = 2**53 - 1
"""The largest span sequence id (in magnitude) a caller may give: the largest integer a JSON number carries exactly
to every reader (JavaScript, float-based parsers). Ids the store allocates continue above a given one and stay far
below the database's limit."""

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
    """A private copy of the config (a fresh default for None). Dicts are validated into a RolloutConfig; timeouts
    must be finite (None is the way to say "no limit")."""
    if config is None:
        return RolloutConfig()
    if isinstance(config, RolloutConfig):
        config = config.model_dump()
    elif not isinstance(config, dict):
        raise InvalidArgumentTypeError(f"config must be a RolloutConfig, got {type(config).__name__}: {config!r}")
    try:
        checked = RolloutConfig.model_validate(config)
    except ValidationError as exc:
        raise InvalidArgumentError(f"Invalid rollout config: {exc}") from None
    for name in ("timeout_seconds", "unresponsive_seconds"):
        value = getattr(checked, name)
        if value is not None and not math.isfinite(value):
            raise InvalidArgumentError(
                f"Invalid rollout config: {name} must be a finite number of seconds (None for no limit), got {value!r}"
            )
    return checked


def check_metadata(metadata: Any, name: str = "metadata") -> Optional[dict[str, Any]]:
    """A shallow copy of the metadata dict (None stays None); NaN and Infinity are refused (`check_finite`)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise InvalidArgumentTypeError(f"{name} must be a dict, got {type(metadata).__name__}: {metadata!r}")
    return dict(check_finite(metadata, name))


def check_finite(value: Any, name: str) -> Any:
    """`value` when no float inside it (in dicts, lists, tuples, sets and pydantic models, at any depth) is NaN or
    infinite: JSON has no such numbers, so a store could only drop them or turn them into null. The error names
    where the number is, e.g. `input.scores[2]`."""
    stack: list[tuple[Any, str]] = [(value, name)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidArgumentError(
                    f"{path} is {item!r}: NaN and Infinity have no JSON form and cannot be stored"
                )
        elif isinstance(item, dict):
            for key, member in item.items():
                stack.append((member, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key!r}]"))
        elif isinstance(item, (list, tuple)):
            stack.extend((member, f"{path}[{index}]") for index, member in enumerate(item))
        elif isinstance(item, (set, frozenset)):
            stack.extend((member, f"{path}[...]") for member in item)
        elif isinstance(item, BaseModel):
            fields = dict(item.__dict__)
            fields.update(item.__pydantic_extra__ or {})
            stack.extend((member, f"{path}.{key}") for key, member in fields.items())
    return value


def check_stored_integer(value: Any, name: str, *, minimum: int = -MAX_STORED_INTEGER - 1) -> int:
    """An integer the databases can store (`minimum` to `MAX_STORED_INTEGER`); the error names the field."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(f"{name} must be an integer, got {value!r}")
    if not minimum <= value <= MAX_STORED_INTEGER:
        raise InvalidArgumentError(f"{name} must be between {minimum} and {MAX_STORED_INTEGER}, got {value}")
    return value


def check_span_sequence_id(value: Any, name: str = "sequence_id") -> int:
    """A span sequence id a caller gives: an integer of magnitude at most `MAX_SPAN_SEQUENCE_ID` (2^53 - 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(f"{name} must be an integer, got {value!r}")
    if abs(value) > MAX_SPAN_SEQUENCE_ID:
        raise InvalidArgumentError(
            f"{name} must be between -{MAX_SPAN_SEQUENCE_ID} and {MAX_SPAN_SEQUENCE_ID} (2^53 - 1), got {value}"
        )
    return value


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
    return check_stored_integer(limit, "limit")


def check_resources(resources: Any) -> NamedResources:
    """Validate a name -> resource mapping; dicts are parsed through the `resource_type` discriminator."""
    global _named_resources_adapter
    if not isinstance(resources, dict):
        raise InvalidArgumentTypeError(f"resources must be a dict of name -> resource, got {resources!r}")
    if all(isinstance(key, str) and isinstance(value, Resource) for key, value in resources.items()):
        return check_finite(dict(resources), "resources")
    if _named_resources_adapter is None:
        _named_resources_adapter = TypeAdapter(NamedResources)
    try:
        checked = _named_resources_adapter.validate_python(
            {key: value.model_dump() if isinstance(value, Resource) else value for key, value in resources.items()}
        )
    except ValidationError as exc:
        raise InvalidArgumentError(f"Invalid resources: {exc}") from None
    return check_finite(checked, "resources")


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
    check_span_sequence_id(span.sequence_id, f"sequence_id of span {span.span_id!r}")


def check_enqueue_request(request: Any) -> EnqueueRolloutRequest:
    if isinstance(request, EnqueueRolloutRequest):
        return request
    if isinstance(request, dict):
        try:
            return EnqueueRolloutRequest.model_validate(request)
        except ValidationError as exc:
            raise InvalidArgumentError(f"Invalid enqueue request: {exc}") from None
    raise InvalidArgumentTypeError(f"Expected an EnqueueRolloutRequest, got {type(request).__name__}: {request!r}")
