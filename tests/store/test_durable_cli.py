"""`agl demo --store URL` runs on the durable stores and leaves its data behind for inspection."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from agentlightning.cli import main

from .durable_support import DurableDatabase


def test_demo_runs_on_an_sqlite_file_and_leaves_it_behind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "agl-demo.db"
    assert main(["demo", "--store", f"sqlite:///{path}"]) == 0
    assert "3 rollouts, 4 attempts, 7 spans" in capsys.readouterr().out
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT status, COUNT(*) FROM rollouts GROUP BY status").fetchall() == [("succeeded", 3)]


@pytest.mark.postgres
def test_demo_runs_on_postgres(capsys: pytest.CaptureFixture[str]) -> None:
    database = DurableDatabase("postgres")
    try:
        assert main(["demo", "--store", database.url]) == 0
        assert "3 rollouts, 4 attempts, 7 spans" in capsys.readouterr().out
    finally:
        asyncio.run(database.cleanup())
