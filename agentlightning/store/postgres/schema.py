"""The PostgreSQL store's schema (one PostgreSQL schema per store) and its forward migrations.

Text columns use the "C" collation so that sorting matches Python's code-point order, whatever the database's locale.
Migrations run in one transaction under an advisory lock, so processes opening the store at the same time cannot
race; DDL is transactional in PostgreSQL, so a failed migration leaves nothing half-done.
"""

from __future__ import annotations

import re
from typing import Optional

from psycopg import AsyncConnection, sql

from agentlightning.store.errors import InvalidArgumentError, SchemaVersionError, StoreOpenError

APPLICATION = "agentlightning"

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

_TEXT = 'TEXT COLLATE "C"'
_TIME = "DOUBLE PRECISION"
_SEQ = "seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

#: MIGRATIONS[n] brings a schema from version n to n + 1. Never edit a released step; append a new one.
MIGRATIONS: list[list[str]] = [
    [
        "CREATE TABLE agl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"CREATE TABLE rollouts ({_SEQ}, rollout_id {_TEXT} NOT NULL UNIQUE, status {_TEXT} NOT NULL, "
        f"mode {_TEXT}, resources_id {_TEXT}, start_time {_TIME} NOT NULL, end_time {_TIME}, "
        f"health_deadline {_TIME}, data TEXT NOT NULL)",
        "CREATE INDEX rollouts_by_health_deadline ON rollouts (health_deadline) WHERE health_deadline IS NOT NULL",
        "CREATE INDEX rollouts_by_status ON rollouts (status)",
        f"CREATE TABLE attempts ({_SEQ}, rollout_id {_TEXT} NOT NULL, attempt_id {_TEXT} NOT NULL, "
        f"sequence_id BIGINT NOT NULL, status {_TEXT} NOT NULL, worker_id {_TEXT}, start_time {_TIME} NOT NULL, "
        f"end_time {_TIME}, last_heartbeat_time {_TIME}, data TEXT NOT NULL, UNIQUE (rollout_id, attempt_id), "
        "UNIQUE (rollout_id, sequence_id))",
        f"CREATE TABLE rollout_queue ({_SEQ}, rollout_id {_TEXT} NOT NULL UNIQUE)",
        f"CREATE TABLE spans ({_SEQ}, rollout_id {_TEXT} NOT NULL, attempt_id {_TEXT} NOT NULL, "
        f"sequence_id BIGINT NOT NULL, trace_id {_TEXT} NOT NULL, span_id {_TEXT} NOT NULL, parent_id {_TEXT}, "
        f"name {_TEXT} NOT NULL, start_time {_TIME}, end_time {_TIME}, data TEXT NOT NULL, "
        "UNIQUE (rollout_id, span_id, attempt_id))",
        "CREATE INDEX spans_by_sequence ON spans (rollout_id, sequence_id)",
        f"CREATE TABLE span_counters (rollout_id {_TEXT} PRIMARY KEY, next_value BIGINT NOT NULL DEFAULT 0, "
        "span_count BIGINT NOT NULL DEFAULT 0, span_bytes BIGINT NOT NULL DEFAULT 0, "
        "evicted INTEGER NOT NULL DEFAULT 0)",
        f"CREATE TABLE resources ({_SEQ}, resources_id {_TEXT} NOT NULL UNIQUE, create_time {_TIME} NOT NULL, "
        f"update_time {_TIME} NOT NULL, version BIGINT NOT NULL, latest_seq BIGINT NOT NULL, data TEXT NOT NULL)",
        "CREATE INDEX resources_by_latest ON resources (latest_seq)",
        "CREATE SEQUENCE resources_latest_seq",
        f"CREATE TABLE workers ({_SEQ}, worker_id {_TEXT} NOT NULL UNIQUE, status {_TEXT} NOT NULL, "
        f"last_heartbeat_time {_TIME}, last_dequeue_time {_TIME}, last_busy_time {_TIME}, last_idle_time {_TIME}, "
        f"current_rollout_id {_TEXT}, current_attempt_id {_TEXT}, data TEXT NOT NULL)",
    ],
    [  # 2: idempotency records shared by every server using this schema
        f"CREATE TABLE idempotency (key {_TEXT} PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER, "
        f"body BYTEA, created {_TIME} NOT NULL)",
        "CREATE INDEX idempotency_by_created ON idempotency (created)",
    ],
]


def check_schema_name(schema: str) -> str:
    if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
        raise InvalidArgumentError(
            f"Invalid PostgreSQL schema name {schema!r}: use 1-63 lowercase letters, digits and underscores, "
            "not starting with a digit"
        )
    return schema


async def _schema_version(conn: AsyncConnection, schema: str, location: str) -> int:
    cur = await conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
    tables = {row[0] for row in await cur.fetchall()}
    if not tables:
        return 0
    if "agl_meta" not in tables:
        raise StoreOpenError(
            f"Schema {schema!r} of {location} holds tables of another application (no agl_meta); refusing to "
            "modify it; choose another schema"
        )
    cur = await conn.execute(sql.SQL("SELECT key, value FROM {}.agl_meta").format(sql.Identifier(schema)))
    meta = {key: value for key, value in await cur.fetchall()}
    if meta.get("application") != APPLICATION or "schema_version" not in meta:
        raise StoreOpenError(f"Schema {schema!r} of {location} is not an agentlightning store")
    return int(meta["schema_version"])


async def migrate(
    conn: AsyncConnection, schema: str, location: str, migrations: Optional[list[list[str]]] = None
) -> int:
    """Create or upgrade the store's tables in `schema` (the connection's search_path). Returns the old version."""
    migrations = MIGRATIONS if migrations is None else migrations
    latest = len(migrations)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"agl-migrate:{schema}",))
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        found = await _schema_version(conn, schema, location)
        if found > latest:
            raise SchemaVersionError(location, found, latest)
        for step in migrations[found:]:
            for statement in step:
                await conn.execute(statement)  # type: ignore[arg-type]
        if found < latest:
            await conn.execute(
                "INSERT INTO agl_meta (key, value) VALUES ('application', %s), ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (APPLICATION, str(latest)),
            )
    return found
