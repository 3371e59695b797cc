"""The Python environment test_crewai.py runs CrewAI in: a virtual environment of its own, built once per machine.

Why a separate environment: crewai cannot be installed beside the OpenAI Agents SDK that the test environment holds
(crewai 1.15 requires openai<3, openai-agents 0.24 requires openai>=3), so `pip install
'agentlightning[crewai,openai-agents]'` has no solution. This environment holds the project's core requirements and
its `openai` and `crewai` extras, read from pyproject.toml (so it follows the pins there); Agent Lightning itself is
used from the checkout.

Where: `$AGL_CREWAI_VENV`, else `~/.cache/agentlightning/crewai-<Python version>-<hash of the requirements>`. A fresh
clone (CI) reuses the environment an earlier run built on the machine (about 1 GB; installing it from the package
registry took 1 min 43 s here); other pins build another. A lock serialises two runs that would build it at once; a
marker written last tells a complete environment from one whose installation was cut short.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXTRAS = ("openai", "crewai")
_COMPLETE = ".agl-complete"
_SELF = re.compile(r"^agentlightning\[([^\]]+)\]$")


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The core requirements and those of `EXTRAS` (self-references such as `agentlightning[openai]` expanded)."""
    import tomllib

    project = tomllib.loads(pyproject.read_text())["project"]
    optional: dict[str, list[str]] = project["optional-dependencies"]
    found: list[str] = list(project["dependencies"])
    pending, seen = list(EXTRAS), set()
    while pending:
        extra = pending.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in optional[extra]:
            nested = _SELF.match(requirement.strip())
            if nested:
                pending += [name.strip() for name in nested.group(1).split(",")]
            elif requirement not in found:
                found.append(requirement)
    return found


def location(wanted: list[str]) -> Path:
    override = os.environ.get("AGL_CREWAI_VENV")
    if override:
        return Path(override)
    version = f"py{sys.version_info.major}{sys.version_info.minor}"
    digest = hashlib.sha256("\n".join(sorted(wanted)).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "agentlightning" / f"crewai-{version}-{digest}"


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure(timeout: float = 1500.0) -> Path:
    """The Python of a complete CrewAI environment, built first when there is none.

    Raises:
        RuntimeError: the environment could not be built (pip's last output lines say why).
    """
    wanted = requirements()
    venv = location(wanted)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building it: wait for it
        if (venv / _COMPLETE).exists():
            return python_of(venv)
        shutil.rmtree(venv, ignore_errors=True)  # an installation cut short
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        install = [str(python_of(venv)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *wanted]
        result = subprocess.run(install, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"Installing the CrewAI environment in {venv} failed:\n{tail}")
        (venv / _COMPLETE).write_text("\n".join(wanted) + "\n")
    return python_of(venv)
