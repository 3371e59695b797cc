"""`agl export` on a SQLite store: files written whole (or not at all), clear errors for bad input."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentlightning.cli import main as agl
from agentlightning.cli.export import PlainProgress
from agentlightning.store.sqlite.store import SqliteLightningStore

from .builders import Call, add_rollout, two_turns


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    path = tmp_path / "store.db"

    async def fill() -> None:
        store = SqliteLightningStore(str(path))
        try:
            await add_rollout(store, two_turns([1, 2], [7], ([10], [12])), reward=1.0)
            await add_rollout(store, [Call([1, 2], [11])], reward=0.0)
            await add_rollout(store, [Call([1], [2])], reward=1.0, status="failed")
        finally:
            await store.close()

    asyncio.run(fill())
    return f"sqlite:///{path}"


def test_sft_export_writes_one_json_line_per_conversation_and_a_summary(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sft.jsonl"
    assert agl(["export", "--store", store_url, "--out", str(out), "--summary-json"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["input_ids"] for line in lines] == [[1, 2, 10, 7, 12], [1, 2, 11]]
    err = capsys.readouterr().err
    assert "2 records (sft, per conversation) from 2 of 3 rollouts" in err
    assert "left out: rollout failed 1" in err
    summary = json.loads(err.strip().splitlines()[-1])
    assert summary["records"] == 2 and summary["calls"] == 3 and summary["drifted_calls"] == 0
    assert not out.with_name("sft.jsonl.partial").exists()


def test_jsonl_goes_to_stdout_without_out(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert agl(["export", "--store", store_url, "--kind", "rl", "--min-reward", "0.5", "--quiet"]) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert [line["response_ids"] for line in lines] == [[10, 7, 12]]
    assert captured.err == ""


def test_progress_lines_go_to_stderr_when_it_is_not_a_terminal(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert agl(["export", "--store", store_url, "--out", str(tmp_path / "x.jsonl")]) == 0
    assert "agl export: rollouts 3 of 3" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--agent-match", "(unclosed"], "--agent-match '(unclosed' is not a valid regular expression"),
        (["--min-reward", "nan"], "--min-reward must be a finite number"),
        (["--kind", "preference", "--unit", "call"], "--unit call applies to --kind sft and rl"),
        (["--format", "parquet"], "--format parquet needs --out PATH"),
        (["--out", "/no/such/dir/x.jsonl"], "the directory /no/such/dir does not exist"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(
    store_url: str, arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert agl(["export", "--store", store_url, *arguments]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_sqlite_file_is_reported_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.db"
    assert agl(["export", "--store", f"sqlite:///{missing}"]) == 1
    assert f"no SQLite store at {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_parquet_without_pyarrow_names_the_install(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    out = tmp_path / "x.parquet"
    assert agl(["export", "--store", store_url, "--format", "parquet", "--out", str(out)]) == 1
    assert "pip install 'agentlightning[export]'" in capsys.readouterr().err
    assert not out.exists()


def test_a_failed_export_leaves_no_file(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("agentlightning.export.run.sft_records", broken)
    out = tmp_path / "x.jsonl"
    assert agl(["export", "--store", store_url, "--out", str(out)]) == 1
    assert f"export failed; {out} was not written: RuntimeError: disk on fire" in capsys.readouterr().err
    assert not out.exists() and not out.with_name("x.jsonl.partial").exists()


def test_export_is_listed_among_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert agl(["--help"]) == 0
    assert "export" in capsys.readouterr().out


def test_plain_progress_reports_a_completed_phase_once_however_often_it_is_reported() -> None:
    lines: list[str] = []
    progress = PlainProgress(interval=10.0, clock=lambda: 0.0, emit=lines.append)
    for _ in range(165):
        progress("rollouts", 164, 164)
    assert lines == ["agl export: rollouts 164 of 164"]


def test_plain_progress_writes_at_most_a_line_per_interval_until_the_end() -> None:
    now = [0.0]
    lines: list[str] = []
    progress = PlainProgress(interval=10.0, clock=lambda: now[0], emit=lines.append)
    for done in range(1, 100):
        now[0] = done * 0.5  # a rollout every half second
        progress("rollouts", done, 100)
    progress("rollouts", 100, 100)
    assert lines == [
        "agl export: rollouts 1 of 100",
        "agl export: rollouts 21 of 100",
        "agl export: rollouts 41 of 100",
        "agl export: rollouts 61 of 100",
        "agl export: rollouts 81 of 100",
        "agl export: rollouts 100 of 100",
    ]
