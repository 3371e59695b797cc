"""What importing the package and running a runner process load: the heavy libraries only where they are used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import agentlightning

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["torch", "transformers", "numpy", "peft", "safetensors", "tokenizers"]
"""What the model side needs (the trainer's policy, the inference server) and a runner never does."""
LAZY = ["pydantic", "agentlightning.types", "agentlightning.store", "agentlightning.execution", "asyncio"]
"""What `import agentlightning` defers to the first use of a name that needs it."""


def _loaded_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_import_agentlightning_loads_none_of_the_model_libraries() -> None:
    assert _loaded_after("import agentlightning").isdisjoint(HEAVY)


def test_import_agentlightning_defers_pydantic_the_store_and_the_strategies() -> None:
    assert _loaded_after("import agentlightning").isdisjoint(LAZY)


def test_every_public_name_resolves_from_the_package() -> None:
    missing = [name for name in agentlightning.__all__ if getattr(agentlightning, name, None) is None]
    assert missing == []


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from agentlightning import *", namespace)
    assert set(agentlightning.__all__) <= set(namespace)


def test_a_subpackage_is_reachable_as_an_attribute_after_a_plain_import() -> None:
    assert _loaded_after("import agentlightning as agl; agl.store.LightningStore") >= {"agentlightning.store"}


def test_an_unknown_attribute_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        agentlightning.no_such_name  # noqa: B018


def test_the_pydantic_models_build_their_schemas_on_first_use() -> None:
    code = (
        "import agentlightning as agl\n"
        "built_at_import = agl.Rollout.__pydantic_complete__\n"
        "rollout = agl.Rollout(rollout_id='r', input={'a': 1}, start_time=0.0)\n"
        "assert not built_at_import and agl.Rollout.__pydantic_complete__ and rollout.status == 'queuing'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_main_job_script_imported_as_a_spawned_runner_imports_no_model_library() -> None:
    # A spawned runner process imports the parent's script as __mp_main__ before it runs anything.
    script = ROOT / "examples" / "arithmetic_rl" / "train.py"
    code = f"import runpy; runpy.run_path({str(script)!r}, run_name='__mp_main__')"
    assert _loaded_after(code).isdisjoint(HEAVY)


def test_a_runner_process_of_a_grpo_job_imports_no_model_library(tmp_path: Path) -> None:
    out = tmp_path / "runner_modules.json"
    job = ROOT / "tests" / "footprint" / "runner_modules_job.py"
    subprocess.run([sys.executable, str(job), str(out)], check=True, cwd=ROOT, timeout=240)
    runner_modules = set(json.loads(out.read_text()))
    assert "agentlightning.runner" in runner_modules  # it is the runner's list
    assert runner_modules.isdisjoint(HEAVY)
