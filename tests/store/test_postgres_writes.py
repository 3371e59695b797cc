"""PostgreSQL store writes: only changed rows are rewritten, reads leave no transaction state behind, and a
non-durable statement relaxes only its own commit. A row's `xmin` (the transaction that wrote its current version)
tells whether a call rewrote it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
async def store(dsn: str, schema: str) -> AsyncIterator[Any]:
    from agentlightning.store.postgres.store import PostgresLightningStore

    opened = PostgresLightningStore(dsn, schema=schema, pool_size=2)
    await opened.open()
    yield opened
    await opened.close()


def _xmin(dsn: str, schema: str, table: str, rollout_id: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT xmin::text FROM {schema}.{table} WHERE rollout_id = %s",  # type: ignore[arg-type]
            (rollout_id,),
        ).fetchone()
    assert row is not None
    return row[0]


async def _running(store: Any) -> Any:
    rollout = await store.start_rollout({"prompt": "x" * 1000})
    await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="running")
    return rollout


async def test_a_heartbeat_only_update_rewrites_the_attempt_but_not_the_rollout(
    dsn: str, schema: str, store: Any
) -> None:
    rollout = await _running(store)
    rollout_version = _xmin(dsn, schema, "rollouts", rollout.rollout_id)
    attempt_version = _xmin(dsn, schema, "attempts", rollout.rollout_id)
    updated = await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, last_heartbeat_time=1e9)
    assert updated.last_heartbeat_time == 1e9
    assert _xmin(dsn, schema, "rollouts", rollout.rollout_id) == rollout_version
    assert _xmin(dsn, schema, "attempts", rollout.rollout_id) != attempt_version
    stored = await store.get_latest_attempt(rollout.rollout_id)
    assert stored is not None and stored.last_heartbeat_time == 1e9


async def test_a_metadata_only_attempt_update_leaves_the_rollout_row_alone(dsn: str, schema: str, store: Any) -> None:
    rollout = await _running(store)
    rollout_version = _xmin(dsn, schema, "rollouts", rollout.rollout_id)
    await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, metadata={"step": 3})
    assert _xmin(dsn, schema, "rollouts", rollout.rollout_id) == rollout_version
    stored = await store.get_latest_attempt(rollout.rollout_id)
    assert stored is not None and stored.metadata == {"step": 3}


async def test_a_status_change_rewrites_the_rollout_with_its_new_status(dsn: str, schema: str, store: Any) -> None:
    rollout = await _running(store)
    rollout_version = _xmin(dsn, schema, "rollouts", rollout.rollout_id)
    await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
    assert _xmin(dsn, schema, "rollouts", rollout.rollout_id) != rollout_version
    succeeded = await store.query_rollouts(status_in=["succeeded"])
    assert [item.rollout_id for item in succeeded] == [rollout.rollout_id]


async def test_pooled_connections_return_to_transaction_mode_after_reads(store: Any) -> None:
    rollout = await store.start_rollout({"q": 1})
    assert await store.get_rollout_by_id(rollout.rollout_id) is not None
    storage = store._postgres
    assert storage.pool._idle and all(not conn.autocommit for conn in storage.pool._idle)
    with pytest.raises(ValueError):
        async with storage.sql_transaction(write=False) as tx:
            await tx.db.fetchall("SELECT 1")
            raise ValueError("a failing read")
    assert all(not conn.autocommit for conn in storage.pool._idle)


async def test_a_non_durable_statement_turns_synchronous_commit_off_for_itself_only(store: Any) -> None:
    storage = store._postgres
    setting = "SELECT current_setting('synchronous_commit')"
    assert await storage.run_statement(setting, durable=False) == [("off",)]
    assert await storage.run_statement(setting) == [("on",)]
    async with storage.sql_transaction() as tx:
        assert await tx.db.fetchall(setting) == [("on",)]


async def test_libpq_options_in_a_store_url_reach_the_session(dsn: str, schema: str) -> None:
    from agentlightning.store import store_from_url
    from agentlightning.store.postgres.store import PostgresLightningStore

    store = store_from_url(f"{dsn}?schema={schema}&options=-c%20synchronous_commit%3Doff")
    assert isinstance(store, PostgresLightningStore)
    try:
        async with store._postgres.sql_transaction(write=False) as tx:
            assert await tx.db.fetchall("SELECT current_setting('synchronous_commit')") == [("off",)]
    finally:
        await store.close()
