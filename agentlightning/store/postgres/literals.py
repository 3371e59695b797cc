"""Statements with their parameters written in as SQL literals, for the batches of `BatchingExecutor`.

psycopg's client-side binding (`ClientCursor.mogrify`) handles every type through its adapter machinery and quotes
array elements with regular expressions; for the few types the store sends (text, numbers, booleans, NULL, bytes
and flat lists of those) this module writes the literals directly, with libpq's own escaping, several times faster
(arrays of JSON documents, the span rows, forty times). `render` answers None for anything else, and the caller
falls back to psycopg.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Optional

_PIECES: dict[str, list[str]] = {}


def _pieces(sql: str) -> list[str]:
    """The statement split at its `?` placeholders (cached: the set of statements is small and fixed)."""
    pieces = _PIECES.get(sql)
    if pieces is None:
        if len(_PIECES) > 2000:
            _PIECES.clear()
        pieces = _PIECES[sql] = sql.split("?")
    return pieces


class LiteralWriter:
    """Writes SQL literals with the escaping functions of one connection (its encoding and string settings)."""

    def __init__(self, escape_literal: Callable[[bytes], bytes], escape_bytea: Callable[[bytes], bytes]) -> None:
        self._escape_literal = escape_literal
        self._escape_bytea = escape_bytea

    def render(self, sql: str, params: Sequence[Any]) -> Optional[str]:
        """`sql` (with `?` placeholders) with `params` written in, or None if a parameter has another type."""
        pieces = _pieces(sql)
        if len(pieces) != len(params) + 1:
            return None
        parts = [pieces[0]]
        for value, piece in zip(params, pieces[1:], strict=True):
            literal = self.literal(value)
            if literal is None:
                return None
            parts.append(literal)
            parts.append(piece)
        return "".join(parts)

    def literal(self, value: Any) -> Optional[str]:
        if value is None:
            return "NULL"
        kind = type(value)
        if kind is str:
            if "\x00" in value:
                return None  # psycopg refuses it with its own error
            if "'" not in value and "\\" not in value:
                # Nothing to escape: a quote is the only special character of a '...' literal, and a backslash
                # the only other one where standard_conforming_strings is off.
                return "'" + value + "'"
            return self._escape_literal(value.encode()).decode()
        if kind is bool:
            return "true" if value else "false"
        if kind is int:
            return str(value)
        if kind is float:
            if math.isfinite(value):
                return repr(value)
            return (
                "'NaN'::float8" if math.isnan(value) else ("'Infinity'::float8" if value > 0 else "'-Infinity'::float8")
            )
        if kind is bytes:
            return "'" + self._escape_bytea(value).decode() + "'::bytea"
        if kind is list or kind is tuple:
            if not value:
                return "'{}'"  # untyped: takes the type the statement casts it to, or its context's
            elements = []
            for element in value:
                if type(element) in (list, tuple):
                    return None  # nested arrays: left to psycopg
                literal = self.literal(element)
                if literal is None:
                    return None
                elements.append(literal)
            return "ARRAY[" + ",".join(elements) + "]"
        return None
