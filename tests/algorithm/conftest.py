"""Fixtures of the algorithm tests: one scripted optimizer server per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .scripted import ScriptedOptimizer


@pytest.fixture(scope="module")
def optimizer() -> Iterator[ScriptedOptimizer]:
    server = ScriptedOptimizer().start()
    try:
        yield server
    finally:
        server.stop()
