"""The `agl` command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentlightning.cli import main


def test_demo_walks_through_the_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "attempts ['failed', 'succeeded']" in out
    assert "3 rollouts, 4 attempts, 7 spans" in out


def test_unknown_command_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fly"]) == 2
    assert "unknown command 'fly'" in capsys.readouterr().err


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out


def test_module_entry_point_runs() -> None:
    result = subprocess.run([sys.executable, "-m", "agentlightning", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "usage: agl" in result.stdout
