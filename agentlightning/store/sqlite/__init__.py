"""`SqliteLightningStore`: its storage and schema."""

from agentlightning.store.sqlite.store import (
    SqliteLightningStore,
    parse_sqlite_url,
    store_from_url,
)

__all__ = [
    "SqliteLightningStore",
    "parse_sqlite_url",
    "store_from_url",
]
