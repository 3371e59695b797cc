"""Writing export records as they come: JSON Lines (no dependency) or Parquet (pyarrow, row group by row group).

A file is written under `<path>.partial` and renamed when complete, so an interrupted export never leaves a file
that looks finished. Parquet needs a schema before the first row: each kind has a fixed one, whose columns are the
record's (`records.SFT_COLUMNS`, `records.RL_COLUMNS`, `preference.PREFERENCE_COLUMNS`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import IO, Any, Literal, Optional, Protocol

from .preference import PREFERENCE_COLUMNS
from .records import RL_COLUMNS, SFT_COLUMNS

__all__ = ["Format", "Kind", "RecordWriter", "open_writer", "parquet_schema"]

Format = Literal["jsonl", "parquet"]
Kind = Literal["sft", "rl", "preference"]

COLUMNS: dict[str, list[str]] = {"sft": SFT_COLUMNS, "rl": RL_COLUMNS, "preference": PREFERENCE_COLUMNS}

PYARROW_HINT = "pip install 'agentlightning[export]' (or pip install pyarrow), or use --format jsonl"


class RecordWriter(Protocol):
    """Receives records one at a time; `close` completes the output, `abort` removes what was written."""

    path: Optional[Path]

    def write(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


class JsonlWriter:
    """One JSON object per line, to a file (or to `stream`, e.g. stdout, when `path` is None)."""

    def __init__(self, path: Optional[Path], stream: Optional[IO[str]] = None) -> None:
        self.path = path
        self._owned = path is not None
        if path is not None:
            self._stream: IO[str] = open(_partial(path), "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        else:
            self._stream = stream if stream is not None else sys.stdout

    def write(self, record: dict[str, Any]) -> None:
        self._stream.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        self._stream.write("\n")

    def close(self) -> None:
        if self._owned:
            self._stream.close()
            assert self.path is not None
            os.replace(_partial(self.path), self.path)
        else:
            self._stream.flush()

    def abort(self) -> None:
        if self._owned:
            self._stream.close()
            assert self.path is not None
            _partial(self.path).unlink(missing_ok=True)


def _require_pyarrow() -> Any:
    try:
        import pyarrow  # pyright: ignore[reportMissingImports]
        import pyarrow.parquet  # pyright: ignore[reportMissingImports]
    except ImportError as exc:
        raise ImportError(f"--format parquet needs pyarrow: {PYARROW_HINT}") from exc
    return pyarrow


def parquet_schema(kind: Kind) -> Any:
    """The Arrow schema of a kind's records (columns in `COLUMNS[kind]` order)."""
    pa = _require_pyarrow()
    function = pa.struct([("name", pa.string()), ("arguments", pa.string())])
    tool_call = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", function)])
    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("tool_calls", pa.list_(tool_call)),
            ("tool_call_id", pa.string()),
            ("name", pa.string()),
        ]
    )
    messages, ids, mask = pa.list_(message), pa.list_(pa.int64()), pa.list_(pa.int8())
    types: dict[str, Any] = {
        "messages": messages,
        "prompt": messages,
        "chosen": messages,
        "rejected": messages,
        "tools": pa.string(),
        "input_ids": ids,
        "assistant_masks": mask,
        "prompt_length": pa.int64(),
        "prompt_ids": ids,
        "response_ids": ids,
        "chosen_ids": ids,
        "rejected_ids": ids,
        "loss_mask": mask,
        "chosen_mask": mask,
        "rejected_mask": mask,
        "call_rewards": pa.list_(pa.float64()),
        "reward": pa.float64(),
        "chosen_reward": pa.float64(),
        "rejected_reward": pa.float64(),
        "calls": pa.int64(),
        "drifted_calls": pa.int64(),
        "group_size": pa.int64(),
    }
    return pa.schema([(name, types.get(name, pa.string())) for name in COLUMNS[kind]])


class ParquetWriter:
    """Records buffered into row groups of `row_group_size` and written as each fills."""

    def __init__(self, path: Path, kind: Kind, row_group_size: int = 1000) -> None:
        pa = _require_pyarrow()
        import pyarrow.parquet as pq  # pyright: ignore[reportMissingImports]

        self._pa = pa
        self.path: Optional[Path] = path
        self._target = path
        self.schema = parquet_schema(kind)
        self._rows: list[dict[str, Any]] = []
        self._row_group_size = row_group_size
        self._writer = pq.ParquetWriter(str(_partial(path)), self.schema, compression="zstd")

    def write(self, record: dict[str, Any]) -> None:
        self._rows.append(record)
        if len(self._rows) >= self._row_group_size:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(self._pa.Table.from_pylist(self._rows, schema=self.schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        os.replace(_partial(self._target), self._target)

    def abort(self) -> None:
        self._rows = []
        self._writer.close()
        _partial(self._target).unlink(missing_ok=True)


def open_writer(format: Format, kind: Kind, path: Optional[Path]) -> RecordWriter:
    """A writer for `format`; JSON Lines go to stdout when `path` is None, Parquet needs a path.

    Raises ImportError (naming the install) when pyarrow is missing, ValueError for a bad combination.
    """
    if format == "jsonl":
        return JsonlWriter(path)
    if format == "parquet":
        if path is None:
            raise ValueError("--format parquet needs --out PATH (Parquet is not written to stdout)")
        return ParquetWriter(path, kind)
    raise ValueError(f"unknown format {format!r}: use jsonl or parquet")
