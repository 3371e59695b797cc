"""The store's documented import paths are real modules (no import hook), each exporting its documented names."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# Import paths that the spec (/work/shared/spec/core.md, section 0) and docs/*.md document, with names they export.
DOCUMENTED_PATHS: dict[str, tuple[str, ...]] = {
    "agentlightning.store": ("LightningStore", "InMemoryLightningStore", "LightningStoreThreaded", "store_from_url"),
    "agentlightning.store.base": ("LightningStore", "UNSET", "Unset", "is_queuing", "is_running", "is_finished"),
    "agentlightning.store.memory": ("InMemoryLightningStore", "estimate_model_size"),
    "agentlightning.store.utils": ("propagate_status", "healthcheck", "UpdateRolloutStatus", "UpdateAttemptStatus"),
    "agentlightning.store.threading": ("LightningStoreThreaded",),
    "agentlightning.store.client_server": ("LightningStoreClient", "LightningStoreServer", "RolloutRequest", "Span"),
    "agentlightning.store.sqlite": ("SqliteLightningStore",),
    "agentlightning.store.postgres": ("PostgresLightningStore",),
    "agentlightning.store.http.openapi": (),
    "agentlightning.store.http.server.app": ("create_app",),
    "agentlightning.store.http.server": ("LightningStoreServer",),
    "agentlightning.store.http.client": ("LightningStoreClient",),
}


@pytest.mark.parametrize("path", sorted(DOCUMENTED_PATHS))
def test_a_documented_path_is_a_module_of_its_own_name_with_its_names(path: str) -> None:
    module = importlib.import_module(path)
    assert module.__name__ == path
    assert module.__spec__ is not None and module.__spec__.name == path
    for name in DOCUMENTED_PATHS[path]:
        assert hasattr(module, name), f"{path} lacks {name}"


def test_no_import_hook_of_the_store_is_installed() -> None:
    importlib.import_module("agentlightning.store")
    assert not [finder for finder in sys.meta_path if type(finder).__module__.startswith("agentlightning")]


def test_the_flat_layouts_module_paths_are_gone() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agentlightning.store.sql_transaction")


def test_an_unknown_store_module_fails_to_import() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agentlightning.store.no_such_module")


def test_the_documented_paths_import_in_a_fresh_process() -> None:
    code = "\n".join(f"import {path}" for path in sorted(DOCUMENTED_PATHS))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_public_package_paths_export_the_stores() -> None:
    from agentlightning.store.http.server import LightningStoreServer
    from agentlightning.store.postgres import PostgresLightningStore

    assert LightningStoreServer.__module__ == "agentlightning.store.http.server.server"
    assert PostgresLightningStore.__module__ == "agentlightning.store.postgres.store"
