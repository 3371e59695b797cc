"""The PostgreSQL batches write parameters as SQL literals themselves (`postgres/literals.py`): every value must reach
the server exactly as psycopg's own binding would send it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from .postgres_support import require_postgres

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def connection() -> Iterator[Any]:
    with psycopg.connect(require_postgres(), autocommit=True) as conn:
        yield conn


def _writer(conn: Any) -> Any:
    from psycopg.pq import Escaping

    from agentlightning.store.postgres.literals import LiteralWriter

    escaping = Escaping(conn.pgconn)
    return LiteralWriter(escaping.escape_literal, escaping.escape_bytea)


def _round_trip(conn: Any, sql: str, params: tuple[Any, ...]) -> Any:
    rendered = _writer(conn).render(sql, params)
    assert rendered is not None
    return conn.execute(rendered).fetchone()


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "",
        "it's a 'quote'",
        'back\\slash and "double" quotes',
        '{"json": [1, 2, {"nested": "va\'lue\\n"}]}',
        "unicode é ü 漢字 🎉",
        "percent % and question ? marks",
    ],
)
def test_text_reaches_the_server_unchanged(connection: Any, value: str) -> None:
    assert _round_trip(connection, "SELECT ?::text", (value,)) == (value,)


@pytest.mark.parametrize("value", [0, -1, 2**62, 1.5, -0.25, 1795421755.6756358, 1e-7, 1e300])
def test_numbers_reach_the_server_exactly(connection: Any, value: float) -> None:
    kind = "bigint" if isinstance(value, int) else "float8"
    assert _round_trip(connection, f"SELECT ?::{kind}", (value,)) == (value,)


def test_infinities_and_nan_are_float_literals(connection: Any) -> None:
    row = _round_trip(connection, "SELECT ?::float8, ?::float8, ?::float8", (math.inf, -math.inf, math.nan))
    assert row[0] == math.inf and row[1] == -math.inf and math.isnan(row[2])


def test_null_booleans_and_bytes(connection: Any) -> None:
    data = bytes(range(256))
    assert _round_trip(connection, "SELECT ?, ?, ?, ?::bytea", (None, True, False, data)) == (None, True, False, data)


def test_arrays_of_text_numbers_and_nulls(connection: Any) -> None:
    texts = ['{"a": "b\\"c"}', "it's", None, "é"]
    row = _round_trip(
        connection,
        "SELECT ?::text[], ?::bigint[], ?::float8[], ?::float8[]",
        (texts, [1, 2, 3], [1.5, None], [None, None]),
    )
    assert row == (texts, [1, 2, 3], [1.5, None], [None, None])


def test_an_empty_array_takes_the_type_of_its_cast_or_context(connection: Any) -> None:
    assert _round_trip(connection, "SELECT ?::text[], 'a' = ANY(?)", ([], [])) == ([], False)


def test_unsupported_values_are_left_to_psycopg(connection: Any) -> None:
    writer = _writer(connection)
    assert writer.render("SELECT ?", ({"a": 1},)) is None
    assert writer.render("SELECT ?", ("nul\x00byte",)) is None
    assert writer.render("SELECT ?", ([[1], [2]],)) is None
    assert writer.render("SELECT ?, ?", (1,)) is None  # placeholders and parameters do not match
