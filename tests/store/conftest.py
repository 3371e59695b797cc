from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentlightning.store import LightningStore

from .backends import BACKEND_MARKS, STORE_BACKENDS


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
