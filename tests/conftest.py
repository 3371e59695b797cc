"""Suite-wide fixtures."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator

import pytest

# Test files whose tests must not run beside each other's when the suite runs on several workers (scripts/test.sh
# runs `pytest -n 2 --dist loadgroup`): each group runs on one worker, one test after another.
_SERIAL_GROUPS = {
    "tests/execution/test_ray.py": "ray",  # each test starts a local Ray cluster: two at once overload 2 cores
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _SERIAL_GROUPS.get(item.nodeid.split("::")[0])
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a shell (`bash scripts/test.sh &`, nohup) inherits SIGINT ignored, and
    so would every process its tests start: the tests of what Ctrl-C does then see a Ctrl-C do nothing. The suite
    runs with Python's own Ctrl-C handling, as from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _restore_agentlightning_logger() -> Iterator[None]:
    """Undo `agl.setup_logging()` calls made by a test (example scripts call it): it stops the package logger from
    propagating, which would hide later tests' records from `caplog`; and filters a test added to the root logger's
    handlers."""
    logger = logging.getLogger("agentlightning")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    # pytest's log capture handlers live on the root logger for the whole session: a filter a test adds to them
    # (an example script configuring its console) would hide every later test's records from `caplog`
    root_filters = {handler: list(handler.filters) for handler in logging.getLogger().handlers}
    yield
    for handler in [h for h in logger.handlers if h not in saved[0]]:
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(saved[1])
    logger.propagate = saved[2]
    for handler, filters in root_filters.items():
        handler.filters[:] = filters


@pytest.fixture(autouse=True)
def _sigint_handler_is_left_as_found() -> Iterator[None]:
    """A test that leaves the process's Ctrl-C handling changed fails itself, and the handler is put back: child
    processes inherit an ignored SIGINT, and every later test that relies on Ctrl-C would fail far from the cause."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after != before:
        if before is not None:
            signal.signal(signal.SIGINT, before)
        pytest.fail(f"the test left the SIGINT handler as {after!r} (it was {before!r}); restored", pytrace=False)
