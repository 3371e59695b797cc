"""Helpers for OpenTelemetry span attributes: flattening nested data, rebuilding it, sanitising values, and the
tag and link conventions of annotations (v0.3 `agentlightning.utils.otel`).

OpenTelemetry attributes are flat: a key maps to a str, bool, int, float or a homogeneous list of those. Agent
Lightning stores nested data (reward dimensions, operation inputs, chat messages) as dotted keys, with list items
under their index: `{"a": {"b": 1}, "c": [{"d": 2}]}` becomes `{"a.b": 1, "c.0.d": 2}`.

Tags are `agentlightning.tag.<i> = "<tag>"`; links are `agentlightning.link.<i>.key_match` / `.value_match`, and tie
an annotation (a reward, say) to the spans whose attribute `key_match` (or `trace_id` / `span_id`) equals
`value_match`. Nothing here imports the OpenTelemetry SDK until a provider helper is called.
"""

from __future__ import annotations

import json
import logging
import math
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

from agentlightning.semconv import LightningSpanAttributes, LinkPydanticModel
from agentlightning.types import Attributes, AttributeValue

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

__all__ = [
    "check_attributes_sanity",
    "extract_links_from_attributes",
    "extract_tags_from_attributes",
    "filter_and_unflatten_attributes",
    "filter_attributes",
    "flatten_attributes",
    "format_exception_attributes",
    "full_qualified_name",
    "get_tracer",
    "get_tracer_provider",
    "make_link_attributes",
    "make_tag_attributes",
    "query_linked_spans",
    "sanitize_attribute_value",
    "sanitize_attributes",
    "sanitize_list_attribute_sanity",
    "unflatten_attributes",
]

T = TypeVar("T")

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


def flatten_attributes(data: Mapping[str, Any], prefix: str = "", *, expand_leaf_lists: bool = False) -> Attributes:
    """Flatten nested mappings and lists into dotted attribute keys (see the module docstring).

    Lists of primitives of one type stay lists unless `expand_leaf_lists` (then every item gets its index key); other
    lists are flattened by index. None values are left out and values OpenTelemetry cannot hold are sanitised with
    `sanitize_attribute_value`.
    """
    result: Attributes = {}
    _flatten_into(result, data, prefix, expand_leaf_lists)
    return result


def _flatten_into(result: Attributes, value: Any, key: str, expand: bool) -> None:
    if isinstance(value, Mapping):
        mapping: Mapping[Any, Any] = value  # type: ignore[assignment]
        if not mapping and key:
            return
        for sub_key, sub_value in mapping.items():
            _flatten_into(result, sub_value, f"{key}.{sub_key}" if key else str(sub_key), expand)
        return
    if isinstance(value, (list, tuple)) and (expand or not _is_primitive_list(list(value))):  # type: ignore[arg-type]
        for index, item in enumerate(value):  # type: ignore[arg-type]
            _flatten_into(result, item, f"{key}.{index}" if key else str(index), expand)
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


def filter_attributes(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The attributes whose key is `prefix` or starts with `prefix.`."""
    head = prefix + "."
    return {key: value for key, value in attributes.items() if key == prefix or key.startswith(head)}


def sanitize_attributes(attributes: Mapping[str, Any]) -> Attributes:
    """Every value made acceptable to OpenTelemetry (`sanitize_attribute_value`); None values are left out."""
    result: Attributes = {}
    for key, value in attributes.items():
        sanitized = sanitize_attribute_value(value)
        if sanitized is not None:
            result[key] = sanitized
    return result


def sanitize_list_attribute_sanity(items: Sequence[Any]) -> list[Any]:
    """A list OpenTelemetry accepts: one primitive type, with numbers widened (bools and ints to int, any number to
    float). Strings mixed with other types, or non-primitives, are a ValueError naming the types found."""
    values = list(items)
    kinds = {type(value) for value in values}
    if len(kinds) <= 1 and kinds <= set(_PRIMITIVES):
        return values
    if kinds <= {bool, int}:
        return [int(value) for value in values]
    if kinds <= {bool, int, float}:
        return [float(value) for value in values]
    raise ValueError(f"A list attribute must hold one primitive type, got {sorted(kind.__name__ for kind in kinds)}")


def check_attributes_sanity(attributes: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first key that is not a non-empty string, or the first value that is not an
    OpenTelemetry attribute value (str, bool, int, float, or a list of one of those types)."""
    for key, value in attributes.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"Attribute keys must be non-empty strings, got {key!r}")
        if isinstance(value, _PRIMITIVES):
            continue
        if isinstance(value, (list, tuple)) and (not value or _is_primitive_list(list(value))):  # type: ignore[arg-type]
            continue
        raise ValueError(f"Attribute {key!r} has a value OpenTelemetry cannot hold: {type(value).__name__}")


def make_tag_attributes(tags: Sequence[str]) -> Attributes:
    """Attributes tagging a span: `agentlightning.tag.<i> = tag`. A tag that is not a string is a ValueError."""
    for index, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise ValueError(f"Tag {index} must be a string, got {type(tag).__name__}")
    return {f"{LightningSpanAttributes.TAG.value}.{index}": tag for index, tag in enumerate(tags)}


def extract_tags_from_attributes(attributes: Mapping[str, Any]) -> list[str]:
    """The tags of a span (indexed keys, or one list-valued `agentlightning.tag`); malformed tags are a ValueError."""
    prefix = LightningSpanAttributes.TAG.value
    whole = attributes.get(prefix)
    if isinstance(whole, (list, tuple)):
        tags: list[Any] = list(whole)  # type: ignore[arg-type]
    else:
        nested = filter_and_unflatten_attributes(attributes, prefix)
        if not nested:
            return []
        if not isinstance(nested, list):
            raise ValueError(f"{prefix} attributes must be indexed 0, 1, ..., got keys {sorted(nested)}")
        tags = nested
    bad = [tag for tag in tags if not isinstance(tag, str)]
    if bad:
        raise ValueError(f"Tags must be strings, got {bad!r}")
    return tags


def make_link_attributes(links: Mapping[str, str]) -> Attributes:
    """Attributes linking a span to others: `{"gen_ai.response.id": "chatcmpl-1"}` becomes
    `agentlightning.link.0.key_match = "gen_ai.response.id"`, `agentlightning.link.0.value_match = "chatcmpl-1"`.

    Raises:
        ValueError: a value that is not a string (links match exactly on text).
    """
    prefix = LightningSpanAttributes.LINK.value
    result: Attributes = {}
    for index, (key, value) in enumerate(links.items()):
        if not isinstance(value, str):
            raise ValueError(f"Link value for {key!r} must be a string, got {type(value).__name__}")
        result[f"{prefix}.{index}.key_match"] = str(key)
        result[f"{prefix}.{index}.value_match"] = value
    return result


def extract_links_from_attributes(attributes: Mapping[str, Any]) -> list[LinkPydanticModel]:
    """The links of a span (see `make_link_attributes`); malformed links raise a pydantic ValidationError."""
    nested = filter_and_unflatten_attributes(attributes, LightningSpanAttributes.LINK.value)
    items = nested if isinstance(nested, list) else ([] if not nested else [nested])
    return [LinkPydanticModel.model_validate(item) for item in items]


def _span_identity(span: Any, key: str) -> Optional[str]:
    """`trace_id` / `span_id` of a stored Span or an OpenTelemetry span, as hex text."""
    value = getattr(span, key, None)
    if isinstance(value, str):
        return value
    context = getattr(span, "context", None) or getattr(span, "get_span_context", lambda: None)()
    number = getattr(context, key, None)
    if isinstance(number, int):
        return format(number, "032x" if key == "trace_id" else "016x")
    return None


def query_linked_spans(spans: Sequence[T], links: Sequence[LinkPydanticModel]) -> list[T]:
    """The spans matching every link: `trace_id` and `span_id` compare the span's ids, other keys its attribute."""
    matched: list[T] = []
    for span in spans:
        attributes: Mapping[str, Any] = getattr(span, "attributes", None) or {}
        for link in links:
            if link.key_match in ("trace_id", "span_id"):
                actual: Any = _span_identity(span, link.key_match)
            else:
                actual = attributes.get(link.key_match)
            if actual != link.value_match:
                break
        else:
            matched.append(span)
    return matched


def full_qualified_name(obj: type) -> str:
    """`module.QualName` of a class (just the name for builtins)."""
    module = getattr(obj, "__module__", "builtins")
    return obj.__qualname__ if module == "builtins" else f"{module}.{obj.__qualname__}"


def get_tracer_provider() -> TracerProvider:
    """The OpenTelemetry SDK provider Agent Lightning records with (installed as the global provider when none is
    set; see `agentlightning.utils.otel_provider`)."""
    from agentlightning.utils.otel_provider import get_sdk_provider

    return get_sdk_provider()


def get_tracer(use_active_span_processor: bool = True) -> Tracer:
    """A tracer named `agentlightning`; with `use_active_span_processor=False` its spans reach no processor."""
    if use_active_span_processor:
        return get_tracer_provider().get_tracer("agentlightning")
    from opentelemetry.sdk.trace import TracerProvider

    return TracerProvider().get_tracer("agentlightning")


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
