"""`PostgresLightningStore`: its storage, schema, connection pool and notifications."""

from agentlightning.store.postgres.store import (
    PostgresLightningStore,
    describe_dsn,
    store_from_url,
)

__all__ = [
    "PostgresLightningStore",
    "describe_dsn",
    "store_from_url",
]
