from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentlightning.store import LightningStore

from .backends import BACKEND_MARKS, STORE_BACKENDS
from .durable_support import DurableDatabase


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
