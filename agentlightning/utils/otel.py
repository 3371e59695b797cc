"""Helpers for OpenTelemetry span attributes: flattening nested data, rebuilding it, and sanitising values.

OpenTelemetry attributes are flat: a key maps to a str, bool, int, float or a homogeneous list of those. Agent
Lightning stores nested data (reward dimensions, operation inputs, chat messages) as dotted keys, with list items
under their index: `{"a": {"b": 1}, "c": [{"d": 2}]}` becomes `{"a.b": 1, "c.0.d": 2}`.
"""

from __future__ import annotations

import json
import logging
import math
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from agentlightning.types import Attributes, AttributeValue

__all__ = [
    "filter_and_unflatten_attributes",
    "flatten_attributes",
    "format_exception_attributes",
    "sanitize_attribute_value",
    "unflatten_attributes",
]

logger = logging.getLogger(__name__)

_PRIMITIVES = (str, bool, int, float)


def _is_primitive_list(value: Sequence[Any]) -> bool:
    """A non-empty list whose items all share one primitive type (bool is not mixed with int)."""
    if not value:
        return False
    first = type(value[0])
    if first not in _PRIMITIVES:
        return False
    return all(type(item) is first for item in value)


def sanitize_attribute_value(value: Any) -> Optional[AttributeValue]:
    """Turn `value` into something OpenTelemetry accepts as an attribute value.

    Primitives and homogeneous primitive lists pass through; None gives None (the attribute is left out); anything
    else becomes its JSON text, or its `repr` when it is not JSON-serialisable.
    """
    if value is None:
        return None
    if isinstance(value, _PRIMITIVES):
        return value
    if isinstance(value, (list, tuple)):
        items: list[Any] = list(value)  # type: ignore[arg-type]
        if _is_primitive_list(items):
            return items
    try:
        return json.dumps(value, default=_reject)
    except (TypeError, ValueError):
        return repr(value)


def _reject(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def flatten_attributes(data: Mapping[str, Any], prefix: str = "") -> Attributes:
    """Flatten nested mappings and lists into dotted attribute keys (see the module docstring).

    Lists of primitives of one type stay lists; other lists are flattened by index. None values are left out and
    values OpenTelemetry cannot hold are sanitised with `sanitize_attribute_value`.
    """
    result: Attributes = {}
    _flatten_into(result, data, prefix)
    return result


def _flatten_into(result: Attributes, value: Any, key: str) -> None:
    if isinstance(value, Mapping):
        mapping: Mapping[Any, Any] = value  # type: ignore[assignment]
        if not mapping and key:
            return
        for sub_key, sub_value in mapping.items():
            _flatten_into(result, sub_value, f"{key}.{sub_key}" if key else str(sub_key))
        return
    if isinstance(value, (list, tuple)) and not _is_primitive_list(list(value)):  # type: ignore[arg-type]
        for index, item in enumerate(value):  # type: ignore[arg-type]
            _flatten_into(result, item, f"{key}.{index}" if key else str(index))
        return
    if not key:
        raise ValueError("cannot flatten a non-mapping value without a key")
    sanitized = sanitize_attribute_value(value)
    if sanitized is not None:
        result[key] = sanitized


def unflatten_attributes(attributes: Mapping[str, Any]) -> Union[dict[str, Any], list[Any]]:
    """Rebuild nested data from dotted keys.

    A level whose keys are all integers becomes a list ordered by index (gaps are closed); any other level becomes a
    dict. A key that is both a leaf and a prefix (`"a"` and `"a.b"`) keeps the leaf under the empty key `""`.
    """
    tree: dict[str, Any] = {}
    for key, value in attributes.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {} if child is None else {"": child}
                node[part] = child
            node = child
        last = parts[-1]
        if isinstance(node.get(last), dict):
            node[last][""] = value
        else:
            node[last] = value
    return _listify(tree)


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    converted = {key: _listify(value) for key, value in node.items()}  # type: ignore[union-attr]
    if converted and all(key.isdigit() for key in converted):
        return [converted[key] for key in sorted(converted, key=int)]
    return converted


def filter_and_unflatten_attributes(attributes: Mapping[str, Any], prefix: str) -> Union[dict[str, Any], list[Any]]:
    """Unflatten only the keys under `prefix.` (the prefix itself is stripped)."""
    head = prefix + "."
    selected = {key[len(head) :]: value for key, value in attributes.items() if key.startswith(head)}
    return unflatten_attributes(selected)


def format_exception_attributes(exception: BaseException) -> Attributes:
    """OpenTelemetry semantic-convention attributes describing an exception.

    `exception.type` (class name), `exception.message`, `exception.escaped` (True) and, when the exception carries a
    traceback, `exception.stacktrace`.
    """
    attributes: Attributes = {
        "exception.type": type(exception).__name__,
        "exception.message": str(exception),
        "exception.escaped": True,
    }
    if exception.__traceback__ is not None:
        stacktrace = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))
        if stacktrace.strip():
            attributes["exception.stacktrace"] = stacktrace
    return attributes


def is_finite_number(value: Any) -> bool:
    """True for ints and floats (not bools) that are neither NaN nor infinite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value)
