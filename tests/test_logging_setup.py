"""`agentlightning.logging`: setup is idempotent, writes JSON lines to .jsonl files; configure_logger (0.2)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agentlightning.logging import configure_logger, setup


@pytest.fixture(autouse=True)
def _restore() -> object:
    logger = logging.getLogger("agl_test_logging")
    yield
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def test_setup_twice_does_not_duplicate_handlers(tmp_path: Path) -> None:
    setup("INFO", apply_to=("agl_test_logging",), color=False)
    logger = setup("DEBUG", apply_to=("agl_test_logging",), color=False)
    assert len(logger.handlers) == 1 and logger.level == logging.DEBUG and not logger.propagate


def test_jsonl_files_get_one_json_object_per_record(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "run.jsonl"
    logger = setup("INFO", apply_to=("agl_test_logging",), console=False, files=str(path))
    logger.info("hello %s", "world")
    for handler in logger.handlers:
        handler.flush()
    (line,) = path.read_text().splitlines()
    record = json.loads(line)
    assert record["message"] == "hello world" and record["level"] == "INFO" and record["logger"] == "agl_test_logging"


def test_unknown_levels_are_named() -> None:
    with pytest.raises(ValueError, match="Unknown log level 'LOUD'"):
        setup("LOUD", apply_to=("agl_test_logging",))


def test_configure_logger_is_deprecated_and_attaches_one_plain_handler() -> None:
    with pytest.warns(DeprecationWarning):
        logger = configure_logger(logging.WARNING, name="agl_test_logging")
    assert len(logger.handlers) == 1 and logger.level == logging.WARNING and not logger.propagate


def test_system_snapshot_reports_this_process() -> None:
    import os

    from agentlightning.utils.system_snapshot import system_snapshot

    snapshot = system_snapshot()
    assert snapshot["pid"] == os.getpid()
    assert {"hostname", "cpu_count", "memory_percent", "process_rss_mb"} <= set(snapshot)
    json.dumps(snapshot)
    assert "gpus" in system_snapshot(include_gpu=True)
