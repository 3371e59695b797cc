"""The PostgreSQL server the tests use: skipped when unreachable, except under CI=true where that fails the run."""

from __future__ import annotations

import os
import uuid
from functools import lru_cache

import pytest

POSTGRES_DSN = os.environ.get("AGL_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@lru_cache(maxsize=1)
def _server_problem() -> str:
    """Empty when the server answers, else why not."""
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(POSTGRES_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL is not reachable at {POSTGRES_DSN}: {exc}"
    return ""


def require_postgres() -> str:
    """The test DSN; skips the test when no server answers (fails instead under CI=true)."""
    problem = _server_problem()
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{problem} (CI=true requires the PostgreSQL tests to run)")
        pytest.skip(problem)
    return POSTGRES_DSN


def fresh_schema_name() -> str:
    return f"agl_test_{uuid.uuid4().hex[:16]}"


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # type: ignore[arg-type]
