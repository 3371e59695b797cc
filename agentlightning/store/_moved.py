"""The module paths of the flat store layout (before the layer subpackages), kept importable.

`import agentlightning.store.sql_transaction` and the like resolve to the module at its new place (the same
module object), so code written against the old layout keeps working. Nothing new should use these."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Optional

MOVED_MODULES: dict[str, str] = {
    "agentlightning.store.changes": "agentlightning.store.core.changes",
    "agentlightning.store.clock": "agentlightning.store.core.clock",
    "agentlightning.store.core_attempts": "agentlightning.store.core.attempts",
    "agentlightning.store.core_base": "agentlightning.store.core.shared",
    "agentlightning.store.core_records": "agentlightning.store.core.records",
    "agentlightning.store.core_resources": "agentlightning.store.core.resources",
    "agentlightning.store.core_rollouts": "agentlightning.store.core.rollouts",
    "agentlightning.store.durable": "agentlightning.store.sql.durable",
    "agentlightning.store.http.app": "agentlightning.store.http.server.app",
    "agentlightning.store.http.bodies": "agentlightning.store.http.server.bodies",
    "agentlightning.store.http.claims": "agentlightning.store.http.server.claims",
    "agentlightning.store.http.dispatch": "agentlightning.store.http.server.dispatch",
    "agentlightning.store.http.handlers": "agentlightning.store.http.server.handlers",
    "agentlightning.store.http.idempotency": "agentlightning.store.http.server.idempotency",
    "agentlightning.store.http.lite": "agentlightning.store.http.client.lite",
    "agentlightning.store.http.metrics": "agentlightning.store.http.server.metrics",
    "agentlightning.store.http.middleware": "agentlightning.store.http.server.middleware",
    "agentlightning.store.http.otlp": "agentlightning.store.http.server.otlp",
    "agentlightning.store.http.retry": "agentlightning.store.http.client.retry",
    "agentlightning.store.http.sessions": "agentlightning.store.http.client.sessions",
    "agentlightning.store.http.shared_idempotency": "agentlightning.store.http.server.shared_idempotency",
    "agentlightning.store.http.transport": "agentlightning.store.http.client.transport",
    "agentlightning.store.ids": "agentlightning.store.core.ids",
    "agentlightning.store.lifecycle": "agentlightning.store.core.lifecycle",
    "agentlightning.store.locks": "agentlightning.store.core.locks",
    "agentlightning.store.memory_storage": "agentlightning.store.memory.storage",
    "agentlightning.store.notify": "agentlightning.store.core.notify",
    "agentlightning.store.postgres_listen": "agentlightning.store.postgres.listen",
    "agentlightning.store.postgres_pool": "agentlightning.store.postgres.pool",
    "agentlightning.store.postgres_schema": "agentlightning.store.postgres.schema",
    "agentlightning.store.postgres_storage": "agentlightning.store.postgres.storage",
    "agentlightning.store.query": "agentlightning.store.core.query",
    "agentlightning.store.retention": "agentlightning.store.sql.retention",
    "agentlightning.store.sql_codec": "agentlightning.store.sql.codec",
    "agentlightning.store.sql_dialect": "agentlightning.store.sql.dialect",
    "agentlightning.store.sql_storage": "agentlightning.store.sql.storage",
    "agentlightning.store.sql_transaction": "agentlightning.store.sql.transaction",
    "agentlightning.store.sqlite_schema": "agentlightning.store.sqlite.schema",
    "agentlightning.store.sqlite_storage": "agentlightning.store.sqlite.storage",
    "agentlightning.store.storage": "agentlightning.store.core.storage",
    "agentlightning.store.validation": "agentlightning.store.core.validation",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module path to the module at its new place (the same object, under both names)."""

    def __init__(self) -> None:
        self._own_specs: dict[str, Optional[ModuleSpec]] = {}

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[ModuleSpec]:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED_MODULES[spec.name])
        self._own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the old name's spec on the module: give it back its own.
        old_name = module.__spec__.name if module.__spec__ is not None else ""
        module.__spec__ = self._own_specs.pop(old_name, module.__spec__)


def install() -> None:
    """Register the finder once (called by `agentlightning.store` on import)."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
