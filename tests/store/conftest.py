from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agentlightning.store import LightningStore

from .backends import BACKEND_MARKS, STORE_BACKENDS
from .durable_support import DurableDatabase
from .postgres_support import drop_schema, fresh_schema_name, require_postgres


@pytest.fixture(
    params=[pytest.param(name, marks=BACKEND_MARKS.get(name, ()), id=name) for name in sorted(STORE_BACKENDS)]
)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[LightningStore]:
    """A fresh, empty store of each backend."""
    instance = await STORE_BACKENDS[request.param]()
    try:
        yield instance
    finally:
        await instance.close()


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)])
async def durable(request: pytest.FixtureRequest) -> AsyncIterator[DurableDatabase]:
    """A fresh database of each durable backend, to open (and reopen) stores on."""
    database = DurableDatabase(request.param)
    try:
        yield database
    finally:
        await database.cleanup()


@pytest.fixture
def dsn() -> str:
    """The PostgreSQL DSN of the test server (skips when there is none)."""
    return require_postgres()


@pytest.fixture
def schema(dsn: str) -> Iterator[str]:
    """A fresh PostgreSQL schema name for one test, dropped afterwards."""
    name = fresh_schema_name()
    yield name
    drop_schema(name)
