"""The SQLite store's schema and its forward migrations.

`agl_meta` records the application and the schema version. Opening a database runs the missing migrations in one
IMMEDIATE transaction (all or nothing); a database from a newer version raises SchemaVersionError, and a database
that belongs to another application raises StoreOpenError instead of being modified.
"""

from __future__ import annotations

import sqlite3
from typing import Optional

from agentlightning.store.errors import SchemaVersionError, StoreOpenError

APPLICATION = "agentlightning"

#: MIGRATIONS[n] brings a database from version n to n + 1. Never edit a released step; append a new one.
MIGRATIONS: list[list[str]] = [
    [
        "CREATE TABLE agl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE rollouts (seq INTEGER PRIMARY KEY, rollout_id TEXT NOT NULL UNIQUE, status TEXT NOT NULL, "
        "mode TEXT, resources_id TEXT, start_time REAL NOT NULL, end_time REAL, health_deadline REAL, "
        "data TEXT NOT NULL)",
        "CREATE INDEX rollouts_by_health_deadline ON rollouts (health_deadline) WHERE health_deadline IS NOT NULL",
        "CREATE INDEX rollouts_by_status ON rollouts (status)",
        "CREATE TABLE attempts (seq INTEGER PRIMARY KEY, rollout_id TEXT NOT NULL, attempt_id TEXT NOT NULL, "
        "sequence_id INTEGER NOT NULL, status TEXT NOT NULL, worker_id TEXT, start_time REAL NOT NULL, "
        "end_time REAL, last_heartbeat_time REAL, data TEXT NOT NULL, UNIQUE (rollout_id, attempt_id), "
        "UNIQUE (rollout_id, sequence_id))",
        "CREATE TABLE rollout_queue (seq INTEGER PRIMARY KEY, rollout_id TEXT NOT NULL UNIQUE)",
        "CREATE TABLE spans (seq INTEGER PRIMARY KEY, rollout_id TEXT NOT NULL, attempt_id TEXT NOT NULL, "
        "sequence_id INTEGER NOT NULL, trace_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_id TEXT, "
        "name TEXT NOT NULL, start_time REAL, end_time REAL, data TEXT NOT NULL, "
        "UNIQUE (rollout_id, span_id, attempt_id))",
        "CREATE INDEX spans_by_sequence ON spans (rollout_id, sequence_id)",
        "CREATE TABLE span_counters (rollout_id TEXT PRIMARY KEY, next_value INTEGER NOT NULL DEFAULT 0, "
        "span_count INTEGER NOT NULL DEFAULT 0, span_bytes INTEGER NOT NULL DEFAULT 0, "
        "evicted INTEGER NOT NULL DEFAULT 0)",
        "CREATE TABLE resources (seq INTEGER PRIMARY KEY, resources_id TEXT NOT NULL UNIQUE, "
        "create_time REAL NOT NULL, update_time REAL NOT NULL, version INTEGER NOT NULL, "
        "latest_seq INTEGER NOT NULL, data TEXT NOT NULL)",
        "CREATE INDEX resources_by_latest ON resources (latest_seq)",
        "CREATE TABLE workers (seq INTEGER PRIMARY KEY, worker_id TEXT NOT NULL UNIQUE, status TEXT NOT NULL, "
        "last_heartbeat_time REAL, last_dequeue_time REAL, last_busy_time REAL, last_idle_time REAL, "
        "current_rollout_id TEXT, current_attempt_id TEXT, data TEXT NOT NULL)",
    ],
    [  # 2: idempotency records shared by the server processes of one database
        "CREATE TABLE idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER, body BLOB, "
        "created REAL NOT NULL)",
        "CREATE INDEX idempotency_by_created ON idempotency (created)",
    ],
]


def schema_version(conn: sqlite3.Connection, location: str) -> int:
    """The version of the database (0 when empty). Raises StoreOpenError for another application's database."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return 0
    if "agl_meta" not in tables:
        raise StoreOpenError(
            f"{location} is an SQLite database of another application (no agl_meta table); refusing to modify it"
        )
    meta = dict(conn.execute("SELECT key, value FROM agl_meta").fetchall())
    if meta.get("application") != APPLICATION or "schema_version" not in meta:
        raise StoreOpenError(f"{location} is not an agentlightning store (agl_meta has {sorted(meta)})")
    return int(meta["schema_version"])


def migrate(conn: sqlite3.Connection, location: str, migrations: Optional[list[list[str]]] = None) -> int:
    """Bring the database to the latest version in one transaction. Returns the version it had before."""
    migrations = MIGRATIONS if migrations is None else migrations
    latest = len(migrations)
    found = schema_version(conn, location)
    if found > latest:
        raise SchemaVersionError(location, found, latest)
    if found == latest:
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(conn, location)  # another process may have migrated meanwhile
        if found > latest:
            raise SchemaVersionError(location, found, latest)
        for step in migrations[found:]:
            for statement in step:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO agl_meta (key, value) VALUES ('application', ?), ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (APPLICATION, str(latest)),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found
