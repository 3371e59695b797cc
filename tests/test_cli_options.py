"""Arguments every `agl` command checks the same way: ports, and SQLite stores that must already exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlightning.cli import main as agl


@pytest.mark.parametrize("command", ["store", "dashboard", "serve"])
@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_outside_0_to_65535_is_a_usage_error_naming_it(
    command: str, port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--store", "memory://"] if command == "dashboard" else []
    with pytest.raises(SystemExit) as exited:
        agl([command, *extra, "--port", port])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "argument --port: " in error and "is not a port number" in error and port.lstrip("-") in error
    assert "Traceback" not in error


def test_the_dashboard_refuses_a_sqlite_store_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.db"
    assert agl(["dashboard", "--store", f"sqlite:///{missing}", "--port", "0"]) == 1
    assert f"agl dashboard: no SQLite store at {missing}" in capsys.readouterr().err
    assert not missing.exists()
