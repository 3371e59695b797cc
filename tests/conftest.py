"""Suite-wide fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_agentlightning_logger() -> Iterator[None]:
    """Undo `agl.setup_logging()` calls made by a test (example scripts call it): it stops the package logger from
    propagating, which would hide later tests' records from `caplog`."""
    logger = logging.getLogger("agentlightning")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    for handler in [h for h in logger.handlers if h not in saved[0]]:
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(saved[1])
    logger.propagate = saved[2]
