"""`DurableLightningStore`: the base of the stores kept in a database (SQLite, PostgreSQL)."""

from __future__ import annotations

from typing import Any

from agentlightning.store.core import CoreLightningStore
from agentlightning.store.sql.storage import SqlStorage


class DurableLightningStore(CoreLightningStore):
    """A CoreLightningStore over an SQL storage. It pickles as its constructor options, so an unpickled copy (in
    another process, say) opens the same database."""

    def __init__(self, storage: SqlStorage, options: dict[str, Any], *, scan_debounce_seconds: float) -> None:
        self._sql_storage = storage
        self._options = options
        super().__init__(storage, scan_debounce_seconds=scan_debounce_seconds)

    async def apply_retention(self) -> list[str]:
        """Apply the retention policy now (it also runs on its own schedule). Returns the rollouts cleared."""
        return await self._sql_storage.apply_retention()

    def __getstate__(self) -> dict[str, Any]:
        return dict(self._options)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]
