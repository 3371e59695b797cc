"""Parquet and JSON Lines hold the same records; Parquet is written in row groups as records come."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentlightning.export import ExportOptions, export_store, open_writer
from agentlightning.export.writers import COLUMNS, JsonlWriter
from agentlightning.store.memory import InMemoryLightningStore

from .builders import Call, add_rollout, two_turns

INSTALL_HINT = "Parquet export needs pyarrow: pip install 'agentlightning[export]'"


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


async def _store() -> InMemoryLightningStore:
    store = InMemoryLightningStore()
    meta = {"grpo": {"step": 1, "group": 0}}
    recorded = json.dumps([{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}])
    functions = [{"name": "add", "parameters": '{"type": "object", "properties": {"a": {"type": "integer"}}}'}]
    await add_rollout(store, two_turns([1, 2], [7], ([10], [12])), reward=1.0, metadata=meta)
    await add_rollout(store, two_turns([1, 2], [7], ([11], [13])), reward=0.0, metadata=meta)
    await add_rollout(store, [Call([3], [4], tool_calls=recorded, functions=functions)], reward=None)
    return store


@pytest.mark.parametrize("kind", ["sft", "rl", "preference"])
async def test_parquet_and_jsonl_exports_hold_the_same_records(kind: str, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason=INSTALL_HINT)
    import pyarrow.parquet as pq

    store = await _store()
    written: dict[str, Path] = {}
    for format in ("jsonl", "parquet"):
        path = tmp_path / f"out.{format}"
        writer = open_writer(format, kind, path)  # type: ignore[arg-type]
        await export_store(store, writer, ExportOptions(kind=kind))  # type: ignore[arg-type]
        writer.close()
        written[format] = path
    from_jsonl = [json.loads(line) for line in written["jsonl"].read_text().splitlines()]
    table = pq.read_table(written["parquet"])
    assert table.column_names == COLUMNS[kind]
    assert from_jsonl and _without_nulls(table.to_pylist()) == _without_nulls(from_jsonl)


async def test_parquet_rows_are_written_a_row_group_at_a_time(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason=INSTALL_HINT)
    import pyarrow.parquet as pq

    from agentlightning.export.writers import ParquetWriter

    store = InMemoryLightningStore()
    for index in range(5):
        await add_rollout(store, [Call([1], [index + 2])], reward=1.0)
    path = tmp_path / "out.parquet"
    writer = ParquetWriter(path, "sft", row_group_size=2)
    await export_store(store, writer, ExportOptions(kind="sft"))
    writer.close()
    metadata = pq.ParquetFile(path).metadata
    assert (metadata.num_rows, metadata.num_row_groups) == (5, 3)


def test_an_aborted_jsonl_file_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    writer = JsonlWriter(path)
    writer.write({"a": 1})
    writer.abort()
    assert list(tmp_path.iterdir()) == []


def test_a_jsonl_file_appears_only_when_complete(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    writer = JsonlWriter(path)
    writer.write({"a": 1})
    assert not path.exists()
    writer.close()
    assert path.read_text() == '{"a":1}\n'
