"""The documented extras resolve against the package index (`pip install --dry-run --report`), and the reason of
the documented conflicts (`crewai` with `openai-agents`; LlamaIndex's OpenAI package with `openai-agents`, which is
why the `llamaindex` extra uses its LiteLLM integration: docs/capture.md) still hold in what they resolve to.

Slow (each resolution reads the index's metadata: tens of seconds; the two run in parallel) and skipped when no
package index answers. Resolution only: nothing is downloaded beyond metadata, nothing is installed. The conflict is
checked from the resolved packages' requirements rather than by resolving it, which makes pip backtrack through
every crewai release (minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RESOLVE = ["capture", "crewai"]
LLAMAINDEX_OPENAI = "llama-index-llms-openai>=0.8,<0.9"
"""LlamaIndex's OpenAI package on the line that works with llama-index-core 0.14 (resolved alone: not an extra)."""


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


@pytest.fixture(scope="module")
def index_reachable() -> None:
    probe = subprocess.run(_pip("index", "versions", "packaging", "--timeout", "15"), capture_output=True, text=True)
    if probe.returncode != 0 or "Available versions" not in probe.stdout:
        pytest.skip(f"no package index answers ({(probe.stderr or probe.stdout).strip()[-200:]})")


def _start(extras: str, report: Path, requirement: str = "") -> subprocess.Popen[str]:
    command = _pip(
        "install",
        "--dry-run",
        "--ignore-installed",
        "--no-build-isolation",  # the project's metadata is built with this environment's setuptools
        "--quiet",
        "--report",
        str(report),
        requirement or f"{ROOT}[{extras}]",
    )
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _openai_requirement(report: dict[str, Any], package: str) -> SpecifierSet:
    (item,) = [i for i in report["install"] if i["metadata"]["name"].lower() == package]
    specs = [Requirement(r) for r in item["metadata"].get("requires_dist", [])]
    (openai,) = [r for r in specs if r.name == "openai" and (r.marker is None or r.marker.evaluate({"extra": ""}))]
    return openai.specifier


def test_documented_extras_resolve_and_the_documented_conflict_still_holds(
    index_reachable: None, tmp_path: Path
) -> None:
    reports = {extras: tmp_path / f"{extras.replace(',', '+')}.json" for extras in RESOLVE}
    running = {extras: _start(extras, report) for extras, report in reports.items()}
    llamaindex_report = tmp_path / "llama-index-llms-openai.json"
    llamaindex = _start("", llamaindex_report, LLAMAINDEX_OPENAI)
    outputs = {extras: process.communicate(timeout=900)[0] for extras, process in running.items()}
    resolved: dict[str, dict[str, Any]] = {}
    for extras in RESOLVE:
        assert running[extras].returncode == 0, f"[{extras}] does not resolve:\n{outputs[extras][-3000:]}"
        resolved[extras] = json.loads(reports[extras].read_text())
        assert "agentlightning" in {item["metadata"]["name"].lower() for item in resolved[extras]["install"]}
    # Why [crewai,openai-agents] cannot resolve (docs/capture.md): the newest crewai wants openai < 3, the
    # openai-agents the extra allows wants openai >= 3. When either changes, the docs and pyproject must too.
    crewai_wants = _openai_requirement(resolved["crewai"], "crewai")
    agents_wants = _openai_requirement(resolved["capture"], "openai-agents")
    assert "3.0.0" not in crewai_wants, f"crewai now allows openai 3 ({crewai_wants}): the conflict may be gone"
    assert "2.99.0" not in agents_wants, f"openai-agents now allows openai 2 ({agents_wants}): the conflict may be gone"
    # Why the `llamaindex` extra avoids llama-index-llms-openai (pyproject.toml, docs/capture.md): it wants openai < 3.
    output = llamaindex.communicate(timeout=900)[0]
    assert llamaindex.returncode == 0, f"{LLAMAINDEX_OPENAI} does not resolve:\n{output[-3000:]}"
    llamaindex_wants = _openai_requirement(json.loads(llamaindex_report.read_text()), "llama-index-llms-openai")
    assert "3.0.0" not in llamaindex_wants, (
        f"llama-index-llms-openai now allows openai 3 ({llamaindex_wants}): the `llamaindex` extra could use it"
    )
