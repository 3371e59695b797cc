"""PostgreSQL store: connecting (and clear errors when it cannot), schemas, migrations, URLs, the connection pool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentlightning.store import InvalidArgumentError, SchemaVersionError, StoreOpenError, store_from_url
from agentlightning.store.errors import StoreBusyError

from .postgres_support import drop_schema, fresh_schema_name

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
async def opened(dsn: str, schema: str) -> AsyncIterator[object]:
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = PostgresLightningStore(dsn, schema=schema)
    yield store
    await store.close()


def _execute(dsn: str, statement: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


async def test_an_unreachable_server_is_named_in_the_error_without_the_password() -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = PostgresLightningStore("postgresql://postgres:s3cret@127.0.0.1:1/test", connect_timeout=2)
    with pytest.raises(StoreOpenError, match=r"127\.0\.0\.1:1\b") as info:
        await store.open()
    assert "s3cret" not in str(info.value)
    await store.close()


async def test_an_unknown_database_is_reported_at_open(dsn: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = PostgresLightningStore(dsn.rsplit("/", 1)[0] + "/agl_no_such_database")
    with pytest.raises(StoreOpenError, match="agl_no_such_database"):
        await store.open()
    await store.close()


def test_a_malformed_dsn_is_rejected_at_construction() -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    with pytest.raises(InvalidArgumentError, match="Invalid PostgreSQL DSN"):
        PostgresLightningStore("host=127.0.0.1 port")


@pytest.mark.parametrize("name", ["Upper", "1digit", "semi;colon", "", "x" * 64])
def test_schema_names_must_be_plain_identifiers(name: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    with pytest.raises(InvalidArgumentError, match="schema name"):
        PostgresLightningStore("postgresql://127.0.0.1/test", schema=name)


async def test_the_first_use_creates_the_schema_with_its_version(opened: object, dsn: str, schema: str) -> None:
    await opened.enqueue_rollout("task")  # type: ignore[attr-defined]
    rows = _execute(dsn, f"SELECT key, value FROM {schema}.agl_meta ORDER BY key")
    from agentlightning.store.postgres import schema as postgres_schema

    assert rows == [("application", "agentlightning"), ("schema_version", str(len(postgres_schema.MIGRATIONS)))]


async def test_stores_in_different_schemas_do_not_see_each_other(dsn: str, schema: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    other_schema = fresh_schema_name()
    first = PostgresLightningStore(dsn, schema=schema)
    second = PostgresLightningStore(dsn, schema=other_schema)
    try:
        await first.enqueue_rollout("only in the first")
        assert list(await second.query_rollouts()) == []
        assert await second.dequeue_rollout() is None
    finally:
        await first.close()
        await second.close()
        drop_schema(other_schema)


async def test_a_schema_from_a_newer_version_is_refused(opened: object, dsn: str, schema: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    await opened.open()  # type: ignore[attr-defined]
    _execute(dsn, f"UPDATE {schema}.agl_meta SET value = '42' WHERE key = 'schema_version'")
    newer = PostgresLightningStore(dsn, schema=schema)
    with pytest.raises(SchemaVersionError, match="schema version 42"):
        await newer.open()
    await newer.close()


async def test_another_applications_schema_is_left_untouched(dsn: str, schema: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    _execute(dsn, f"CREATE SCHEMA {schema}")
    _execute(dsn, f"CREATE TABLE {schema}.notes (text TEXT)")
    store = PostgresLightningStore(dsn, schema=schema)
    with pytest.raises(StoreOpenError, match="another application"):
        await store.open()
    await store.close()
    tables = _execute(dsn, f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}'")
    assert tables == [("notes",)]


async def test_a_failing_migration_changes_nothing(
    opened: object, dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentlightning.store.postgres import schema as postgres_schema
    from agentlightning.store.postgres.store import PostgresLightningStore

    await opened.open()  # type: ignore[attr-defined]
    broken = [*postgres_schema.MIGRATIONS, ["CREATE TABLE annotations (note TEXT)", "THIS IS NOT SQL"]]
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", broken)
    store = PostgresLightningStore(dsn, schema=schema)
    with pytest.raises(StoreOpenError, match="syntax error"):
        await store.open()
    await store.close()
    tables = _execute(dsn, f"SELECT 1 FROM information_schema.tables WHERE table_schema = '{schema}' "
                           "AND table_name = 'annotations'")  # fmt: skip
    assert tables == []
    version = _execute(dsn, f"SELECT value FROM {schema}.agl_meta WHERE key = 'schema_version'")
    assert version == [(str(len(broken) - 1),)]


async def test_a_url_selects_the_schema_and_passes_other_parameters_to_libpq(dsn: str, schema: str) -> None:
    store = store_from_url(f"{dsn}?schema={schema}&pool_size=3&application_name=agl-test")
    try:
        assert store.schema == schema  # type: ignore[attr-defined]
        await store.enqueue_rollout("task")
        assert len(await store.query_rollouts()) == 1
    finally:
        await store.close()


def test_postgres_scheme_alias_is_accepted() -> None:
    store = store_from_url("postgres://postgres@127.0.0.1:5432/test?schema=agl_alias")
    assert store.schema == "agl_alias"  # type: ignore[attr-defined]


async def test_waiting_too_long_for_a_pooled_connection_raises_store_busy(dsn: str, schema: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = PostgresLightningStore(dsn, schema=schema, pool_size=1, acquire_timeout=0.2)
    try:
        await store.open()
        async with store._postgres.sql_transaction(write=False):
            with pytest.raises(StoreBusyError, match="pool size 1"):
                await store.get_latest_resources()
        assert await store.get_latest_resources() is None  # the connection came back
    finally:
        await store.close()


async def test_the_pool_never_opens_more_connections_than_its_size(dsn: str, schema: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = PostgresLightningStore(dsn, schema=schema, pool_size=3)
    try:
        await asyncio.gather(*(store.enqueue_rollout(i) for i in range(40)))
        assert store._postgres.pool.size <= 3
        assert len(await store.query_rollouts()) == 40
    finally:
        await store.close()


async def test_session_options_in_the_dsn_are_kept(dsn: str, schema: str) -> None:
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = PostgresLightningStore(f"{dsn}?options=-c%20statement_timeout%3D12345", schema=schema)
    try:
        await store.enqueue_rollout("task")
        async with store._postgres.sql_transaction(write=False) as tx:
            rows = await tx.db.fetchall("SHOW statement_timeout")
        assert rows == [("12345ms",)]
    finally:
        await store.close()
