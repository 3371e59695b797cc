"""Argument checks shared by the `agl` subcommands: a TCP port, and a SQLite store path that must already exist."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

__all__ = ["missing_sqlite_file", "port_number"]


def port_number(text: str) -> int:
    """An argparse `type` for `--port`: an integer from 0 (any free port) to 65535, else a usage error naming it."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (an integer from 0 to 65535)") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number: ports run from 0 (any free port) to 65535")
    return value


def missing_sqlite_file(url: str) -> Optional[str]:
    """The path of a `sqlite:///` store URL whose file does not exist (opening it would create an empty database),
    else None (not SQLite, an in-memory database, or a file that exists). A URL that does not parse gives None: the
    store's own opening reports it."""
    if not url.startswith("sqlite:"):
        return None
    from agentlightning.store.sqlite.store import parse_sqlite_url

    try:
        path, _ = parse_sqlite_url(url)
    except ValueError:
        return None
    return None if path == ":memory:" or Path(path).exists() else path
