"""JSON encoding of store models for the SQL backends.

Models are stored as their full JSON (so pydantic extras survive) next to indexed columns. Non-finite floats are
written as the JSON extensions NaN/Infinity, which pydantic reads back, instead of pydantic's default of null (which
would make a span with a NaN attribute unreadable). A value that has no JSON form raises InvalidArgumentError naming
the field, before anything is written.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic_core
from pydantic import BaseModel

from agentlightning.store.errors import InvalidArgumentError

M = TypeVar("M", bound=BaseModel)


def _to_json(value: Any) -> str:
    return pydantic_core.to_json(value, inf_nan_mode="constants").decode()


def encode_model(model: BaseModel, what: str) -> str:
    """The JSON text of `model`; `what` names it in the error ("rollout input", "span", ...)."""
    try:
        return _to_json(model.model_dump())
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"{_describe_failure(model, what)} cannot be stored as JSON: {exc}") from None


def _describe_failure(model: BaseModel, what: str) -> str:
    """Name the first field of `model` whose value has no JSON form."""
    fields: dict[str, Any] = dict(model.__dict__)
    fields.update(model.__pydantic_extra__ or {})
    for name, value in fields.items():
        try:
            _to_json(value.model_dump() if isinstance(value, BaseModel) else value)
        except (pydantic_core.PydanticSerializationError, ValueError, TypeError):
            return f"The {name!r} field of the {what}"
    return f"The {what}"


def decode_model(model_type: type[M], data: str | bytes) -> M:
    return model_type.model_validate_json(data)
