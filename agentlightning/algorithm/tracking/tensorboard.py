"""TensorBoard: event files written with the `tensorboard` package's own writer (no TensorFlow, no torch needed).

Metrics are scalars; texts (warnings, the verdict) and the settings are text summaries, shown in TensorBoard's
Text tab. `tensorboard --logdir <log_dir>` shows the run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

from .base import Tracker, flatten_params

__all__ = ["TensorBoardTracker"]


def _protos() -> tuple[Any, Any]:
    """TensorBoard's `Event` and `Summary` protobuf modules (generated code without type information)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    return event_pb2, summary_pb2


class TensorBoardTracker(Tracker):
    """Write the run to TensorBoard event files under `log_dir`."""

    name = "tensorboard"

    def __init__(self, log_dir: Union[str, Path]) -> None:
        try:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError as exc:
            raise ImportError(
                "tracking='tensorboard' needs the tensorboard package: pip install 'agentlightning[tracking]' "
                f"(or tensorboard) ({exc})"
            ) from exc
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer: Any = EventFileWriter(str(self.log_dir))
        self._closed = False

    def _write(self, step: int, values: list[Any]) -> None:
        event_pb2, summary_pb2 = _protos()
        event = event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values))
        self._writer.add_event(event)

    def _text_value(self, name: str, text: str) -> Any:
        from tensorboard.plugins.text import metadata
        from tensorboard.util import tensor_util

        return _protos()[1].Summary.Value(
            tag=name,
            metadata=metadata.create_summary_metadata(display_name=name, description=""),
            tensor=tensor_util.make_tensor_proto([text]),
        )

    def log_params(self, params: Mapping[str, Any]) -> None:
        rows = "\n".join(f"| {key} | {value} |" for key, value in sorted(flatten_params(params).items()))
        self._write(0, [self._text_value("params", f"| setting | value |\n|---|---|\n{rows}")])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        summary_pb2 = _protos()[1]
        values = [summary_pb2.Summary.Value(tag=name, simple_value=float(value)) for name, value in metrics.items()]
        if values:
            self._write(step, values)

    def log_text(self, name: str, text: str, step: int) -> None:
        self._write(step, [self._text_value(name, text)])

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()
