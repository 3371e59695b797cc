"""Reading span attributes written by different recorders (lists, JSON text or Python-literal text)."""

from __future__ import annotations

import ast
import json
from typing import Any, Optional

__all__ = ["parse_literal", "token_id_list"]


def parse_literal(value: Any) -> Any:
    """Decode a JSON or Python-literal string (LiteLLM stores lists and dicts with `str()`); other values pass.

    An undecodable string is returned unchanged.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{(":
        return value
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def token_id_list(value: Any) -> Optional[list[int]]:
    """`value` as a list of token ids, or None when it is missing or not a list of ints."""
    value = parse_literal(value)
    if isinstance(value, (list, tuple)) and all(
        isinstance(item, int) and not isinstance(item, bool)
        for item in value  # type: ignore[union-attr]
    ):
        return list(value)  # type: ignore[arg-type]
    return None
