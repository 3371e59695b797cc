"""SQLite store: opening files (and refusing bad ones), schema migrations, URLs, in-memory databases."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from agentlightning.store import InvalidArgumentError, SchemaVersionError, StoreOpenError, store_from_url
from agentlightning.store.sqlite import schema as sqlite_schema
from agentlightning.store.sqlite.store import SqliteLightningStore, parse_sqlite_url


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM agl_meta").fetchall())


async def test_a_new_file_gets_the_current_schema_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteLightningStore(path)
    await store.enqueue_rollout("task")
    assert _meta(path) == {"application": "agentlightning", "schema_version": str(len(sqlite_schema.MIGRATIONS))}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    await store.close()


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(os.urandom(8192))
    with pytest.raises(StoreOpenError, match="not a database"):
        SqliteLightningStore(path)


def test_a_missing_directory_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(StoreOpenError, match="does not exist"):
        SqliteLightningStore(tmp_path / "missing" / "store.db")


def test_a_directory_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreOpenError, match="is a directory"):
        SqliteLightningStore(tmp_path)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can write to read-only directories")
def test_an_unwritable_location_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "readonly"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        with pytest.raises(StoreOpenError):
            SqliteLightningStore(directory / "store.db")
    finally:
        directory.chmod(0o700)


def test_another_applications_database_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    with pytest.raises(StoreOpenError, match="another application"):
        SqliteLightningStore(path)
    assert _tables(path) == {"notes"}


async def test_a_database_from_a_newer_version_is_refused_with_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await SqliteLightningStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE agl_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="schema version 99") as info:
        SqliteLightningStore(path)
    assert info.value.found == 99 and info.value.supported == len(sqlite_schema.MIGRATIONS)


async def test_opening_an_older_database_runs_the_missing_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.db"
    store = SqliteLightningStore(path)
    rollout = await store.enqueue_rollout("kept")
    await store.close()
    newer = [*sqlite_schema.MIGRATIONS, ["CREATE TABLE annotations (rollout_id TEXT, note TEXT)"]]
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", newer)
    reopened = SqliteLightningStore(path)
    assert _meta(path)["schema_version"] == str(len(newer))
    assert "annotations" in _tables(path)
    assert (await reopened.get_rollout_by_id(rollout.rollout_id)) is not None
    await reopened.close()


async def test_a_failing_migration_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "store.db"
    await SqliteLightningStore(path).close()
    before = _tables(path)
    broken = [*sqlite_schema.MIGRATIONS, ["CREATE TABLE annotations (note TEXT)", "THIS IS NOT SQL"]]
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", broken)
    with pytest.raises(StoreOpenError, match="syntax error"):
        SqliteLightningStore(path)
    assert _tables(path) == before
    assert _meta(path)["schema_version"] == str(len(broken) - 1)


async def test_stores_open_from_sqlite_urls(tmp_path: Path) -> None:
    store = store_from_url(f"sqlite:///{tmp_path}/url.db?synchronous=full&busy_timeout=5")
    assert isinstance(store, SqliteLightningStore) and store.path == f"{tmp_path}/url.db"
    await store.enqueue_rollout("task")
    await store.close()
    assert (tmp_path / "url.db").exists()


def test_sqlite_urls_are_parsed_with_their_options() -> None:
    assert parse_sqlite_url("sqlite:///relative/store.db") == ("relative/store.db", {})
    assert parse_sqlite_url("sqlite:////abs/store.db?retention_max_spans=10") == (
        "/abs/store.db",
        {"retention_max_spans": 10},
    )
    assert parse_sqlite_url("sqlite:///:memory:") == (":memory:", {})


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("sqlite://host/store.db", "Invalid SQLite store URL"),
        ("sqlite:///", "Invalid SQLite store URL"),
        ("sqlite:///store.db?colour=blue", "Unknown option 'colour'"),
        ("sqlite:///store.db?busy_timeout=soon", "Invalid value 'soon' for busy_timeout"),
        ("sqlite:///store.db?synchronous=sometimes", "synchronous must be 'normal' or 'full'"),
        ("sqlite:///store.db?retention_max_spans=0", "max_spans must be positive"),
    ],
)
def test_bad_sqlite_urls_are_rejected(url: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match=problem):
        store_from_url(url)


async def test_an_in_memory_database_is_shared_by_threads_but_not_processes() -> None:
    store = store_from_url("sqlite:///:memory:")
    assert store.capabilities.get("zero_copy") is False
    rollout = await store.enqueue_rollout("task")
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(asyncio.run(store.get_rollout_by_id(rollout.rollout_id))))
    thread.start()
    thread.join()
    assert seen and seen[0] is not None
    await store.close()


async def test_acknowledged_writes_are_in_the_file_before_close(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteLightningStore(path)
    rollout = await store.enqueue_rollout("task")
    with sqlite3.connect(path) as conn:  # a separate connection sees the committed row at once
        rows = conn.execute("SELECT status FROM rollouts WHERE rollout_id = ?", (rollout.rollout_id,)).fetchall()
    assert rows == [("queuing",)]
    await store.close()
