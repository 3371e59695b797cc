"""The store's layer subpackages: the flat layout's module paths still import, as the same modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from agentlightning.store._moved import MOVED_MODULES


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_an_old_module_path_imports_the_module_at_its_new_place(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_a_module_imported_by_its_old_path_keeps_its_own_name_and_spec() -> None:
    module = importlib.import_module("agentlightning.store.sql_transaction")
    assert module.__name__ == "agentlightning.store.sql.transaction"
    assert module.__spec__ is not None and module.__spec__.name == "agentlightning.store.sql.transaction"


def test_from_imports_of_old_paths_work_in_a_fresh_process() -> None:
    code = (
        "from agentlightning.store.sql_transaction import SqlTransaction\n"
        "from agentlightning.store.memory import InMemoryLightningStore\n"
        "from agentlightning.store.sqlite import SqliteLightningStore\n"
        "from agentlightning.store.http.client import LightningStoreClient\n"
        "from agentlightning.store.http.retry import RetryPolicy\n"
        "from agentlightning.store.core import CoreLightningStore\n"
        "print(SqlTransaction.__module__, RetryPolicy.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["agentlightning.store.sql.transaction", "agentlightning.utils.retry"]


def test_an_unknown_store_module_still_fails_to_import() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agentlightning.store.no_such_module")


def test_the_public_package_paths_export_the_stores() -> None:
    from agentlightning.store.http.server import LightningStoreServer
    from agentlightning.store.postgres import PostgresLightningStore

    assert LightningStoreServer.__module__ == "agentlightning.store.http.server.server"
    assert PostgresLightningStore.__module__ == "agentlightning.store.postgres.store"
