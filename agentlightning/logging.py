"""Logging setup for Agent Lightning: `setup()` (0.3), `setup_module()` and the deprecated `configure_logger()`.

`setup()` configures the "agentlightning" logger (or the loggers named in `apply_to`) once, idempotently: a console
handler (rich's colored handler on a terminal when rich is installed, a plain stream handler otherwise), optional
log files (a file ending in ".jsonl" gets one JSON object per record), per-submodule levels and extra handlers.
Handlers added by an earlier call are replaced, not duplicated. Runner processes call it with the parent's level.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

__all__ = ["DEFAULT_FORMAT", "JsonLinesFormatter", "configure_logger", "setup", "setup_module"]

DEFAULT_FORMAT = "%(asctime)s [%(levelname)s] (Process-%(process)d %(name)s) %(message)s"
_MARK = "_agentlightning_handler"

Level = Union[int, str]
FileSpec = Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]], Mapping[str, Level], None]


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, process, message (and the exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": round(record.created, 6),
            "iso_time": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created)),
            "level": record.levelname,
            "logger": record.name,
            "process": record.process,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        extra = getattr(record, "agl_event", None)
        if isinstance(extra, Mapping):
            entry.update(extra)
        return json.dumps(entry, default=str)


def _level(value: Level) -> int:
    if isinstance(value, int):
        return value
    resolved = logging.getLevelName(str(value).upper())
    if not isinstance(resolved, int):
        raise ValueError(f"Unknown log level {value!r}; use DEBUG, INFO, WARNING, ERROR or CRITICAL")
    return resolved


def _console_handler(color: Optional[bool], formatter: Optional[logging.Formatter]) -> logging.Handler:
    stream = sys.stderr
    use_color = color if color is not None else bool(getattr(stream, "isatty", lambda: False)())
    if use_color:
        try:
            from rich.logging import RichHandler

            handler: logging.Handler = RichHandler(rich_tracebacks=False, show_path=False, log_time_format="[%X]")
            if formatter is not None:
                handler.setFormatter(formatter)
            return handler
        except ImportError:
            pass
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter or logging.Formatter(DEFAULT_FORMAT))
    return handler


def _file_handlers(files: FileSpec, level: int, formatter: Optional[logging.Formatter]) -> list[logging.Handler]:
    if files is None:
        return []
    if isinstance(files, (str, os.PathLike)):
        specs: list[tuple[str, int]] = [(os.fspath(files), level)]
    elif isinstance(files, Mapping):
        specs = [(os.fspath(path), _level(file_level)) for path, file_level in files.items()]
    else:
        specs = [(os.fspath(path), level) for path in files]
    handlers: list[logging.Handler] = []
    for path, file_level in specs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setLevel(file_level)
        if path.endswith(".jsonl"):
            handler.setFormatter(JsonLinesFormatter())
        else:
            handler.setFormatter(formatter or logging.Formatter(DEFAULT_FORMAT))
        handlers.append(handler)
    return handlers


def setup(
    level: Level = "INFO",
    *,
    console: bool = True,
    color: Optional[bool] = None,
    propagate: bool = False,
    submodule_levels: Optional[Mapping[str, Level]] = None,
    extra_handlers: Sequence[logging.Handler] = (),
    formatter: Union[logging.Formatter, str, None] = None,
    apply_to: Sequence[str] = ("agentlightning",),
    files: FileSpec = None,
    capture_warnings: bool = False,
) -> logging.Logger:
    """Configure Agent Lightning's loggers; returns the first logger of `apply_to`.

    Args:
        level: level of the configured loggers.
        console: log to stderr.
        color: use rich's colored handler (default: when stderr is a terminal).
        propagate: also pass records to the parent loggers (e.g. the root logger's handlers).
        submodule_levels: levels of child loggers, e.g. `{"agentlightning.store": "WARNING"}`.
        extra_handlers: more handlers to attach.
        formatter: a Formatter or a format string for the console and plain-text files.
        apply_to: logger names to configure.
        files: a path, several paths, or `{path: level}`; ".jsonl" files get JSON lines.
        capture_warnings: route `warnings.warn` through logging.
    """
    numeric = _level(level)
    fmt = logging.Formatter(formatter) if isinstance(formatter, str) else formatter
    handlers: list[logging.Handler] = []
    if console:
        handlers.append(_console_handler(color, fmt))
    handlers += _file_handlers(files, numeric, fmt)
    handlers += list(extra_handlers)
    for handler in handlers:
        setattr(handler, _MARK, True)
    if os.name == "nt":
        os.environ.setdefault("PYTHONUTF8", "1")
    configured: list[logging.Logger] = []
    for name in apply_to:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, _MARK, False)]:
            logger.removeHandler(old)
            old.close()
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(numeric)
        logger.propagate = propagate
        configured.append(logger)
    for name, sub_level in (submodule_levels or {}).items():
        logging.getLogger(name).setLevel(_level(sub_level))
    if capture_warnings:
        logging.captureWarnings(True)
    return configured[0] if configured else logging.getLogger("agentlightning")


def setup_module(name: str, level: Level = "INFO", **kwargs: Any) -> logging.Logger:
    """Configure one logger (for example your script's module) the way `setup` configures Agent Lightning's."""
    return setup(level, apply_to=(name,), **kwargs)


def configure_logger(level: int = logging.INFO, name: str = "agentlightning") -> logging.Logger:
    """Deprecated: use `setup()`. One plain stream handler on logger `name` at `level`, not propagating."""
    warnings.warn(
        "configure_logger is deprecated; use agentlightning.logging.setup()", DeprecationWarning, stacklevel=2
    )
    if os.name == "nt":
        os.environ["PYTHONUTF8"] = "1"
    logger = logging.getLogger(name)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler()
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(DEFAULT_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return logger
