"""Experiment tracking: what an algorithm records reaches TensorBoard, MLflow and Weights & Biases, read back with
each library's own reader; the one `tracking=` option builds the trackers and says clearly what is missing."""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentlightning.algorithm.tracking import (
    MultiTracker,
    Tracker,
    flatten_metrics,
    flatten_params,
    make_tracker,
)

STEP_ENTRY = {
    "step": 2,
    "reward_mean": 0.5,
    "informative_groups": 3,
    "drift": {"rate": 0.0, "calls": 8},
    "seconds": {"update": 1.25},
    "calls_per_rollout": None,
    "interrupted": False,
    "note": "text is not a metric",
    "bad": math.nan,
}


def test_flatten_metrics_joins_nested_names_and_keeps_only_finite_numbers() -> None:
    assert flatten_metrics(STEP_ENTRY) == {
        "step": 2.0,
        "reward_mean": 0.5,
        "informative_groups": 3.0,
        "drift/rate": 0.0,
        "drift/calls": 8.0,
        "seconds/update": 1.25,
        "interrupted": 0.0,
    }


def test_flatten_params_joins_nested_names_and_writes_other_values_as_text() -> None:
    flat = flatten_params({"lr": 1e-5, "lora": {"rank": 8}, "stop": None, "kinds": ["a", "b"]})
    assert flat == {"lr": 1e-5, "lora.rank": 8, "stop": None, "kinds": "['a', 'b']"}


def test_no_tracking_option_builds_no_tracker(tmp_path: Path) -> None:
    assert make_tracker(None, directory=tmp_path, run_name="r") is None


def test_an_unknown_library_is_refused_with_the_known_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"Unknown tracking library 'neptune'.*mlflow.*tensorboard.*wandb"):
        make_tracker("neptune", directory=tmp_path, run_name="r")


def test_a_tracking_option_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="tracking must be"):
        make_tracker(42, directory=tmp_path, run_name="r")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("library", "module", "package"),
    [("tensorboard", "tensorboard", "tensorboard"), ("mlflow", "mlflow", "mlflow-skinny"), ("wandb", "wandb", "wandb")],
)
def test_a_library_that_is_not_installed_is_named_with_the_command_that_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, library: str, module: str, package: str
) -> None:
    for name in [m for m in sys.modules if m == module or m.startswith(f"{module}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if absent
    with pytest.raises(ImportError, match=rf"tracking='{library}'.*agentlightning\[tracking\].*{package}"):
        make_tracker(library, directory=tmp_path, run_name="r")


class _Recording(Tracker):
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.metrics: list[tuple[int, dict[str, float]]] = []
        self.closed = False

    def log_params(self, params: Mapping[str, Any]) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if self.fail:
            raise OSError("disk full")
        self.metrics.append((step, dict(metrics)))

    def log_text(self, name: str, text: str, step: int) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_a_failing_tracker_is_dropped_and_the_others_keep_recording(caplog: pytest.LogCaptureFixture) -> None:
    good, bad = _Recording(), _Recording(fail=True)
    both = MultiTracker([bad, good])
    both.log_metrics({"a": 1.0}, 1)
    both.log_metrics({"a": 2.0}, 2)
    assert good.metrics == [(1, {"a": 1.0}), (2, {"a": 2.0})]
    assert bad.closed and both.trackers == [good]
    assert "turned off for this run" in caplog.text


def test_a_list_option_builds_one_tracker_per_item(tmp_path: Path) -> None:
    mine = _Recording()
    tracker = make_tracker(["tensorboard", mine], directory=tmp_path, run_name="r")
    assert isinstance(tracker, MultiTracker) and tracker.trackers[1] is mine
    tracker.close()


def _record(tracker: Tracker) -> None:
    tracker.log_params({"learning_rate": 1e-5, "lora": {"rank": 8}})
    for step in (1, 2, 3):
        tracker.log_metrics(flatten_metrics({"reward_mean": 0.25 * step, "seconds": {"update": 1.0 + step}}), step)
    tracker.log_text("warnings", "no informative group for 3 steps", 3)
    tracker.close()
    tracker.close()  # idempotent


def test_tensorboard_events_read_back_with_tensorboards_reader(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _record(make_tracker("tensorboard", directory=tmp_path, run_name="r"))  # type: ignore[arg-type]
    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    rewards = [(e.step, e.value) for e in events.Scalars("reward_mean")]
    assert rewards == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert [e.value for e in events.Scalars("seconds/update")] == [2.0, 3.0, 4.0]
    texts = {tag: events.Tensors(tag) for tag in events.Tags()["tensors"]}
    assert texts["warnings"][0].step == 3
    assert texts["warnings"][0].tensor_proto.string_val == [b"no informative group for 3 steps"]
    assert b"learning_rate | 1e-05" in texts["params"][0].tensor_proto.string_val[0]


def test_mlflow_run_reads_back_with_the_mlflow_client(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    tracker = make_tracker({"mlflow": {"experiment": "calc"}}, directory=tmp_path, run_name="grpo-run")
    run_id = tracker.run_id  # type: ignore[union-attr]
    _record(tracker)  # type: ignore[arg-type]
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "grpo-run"
    assert client.get_experiment(run.info.experiment_id).name == "calc"
    assert run.data.params == {"learning_rate": "1e-05", "lora.rank": "8"}
    history = client.get_metric_history(run_id, "reward_mean")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.25), (2, 0.5), (3, 0.75)]
    text = Path(client.download_artifacts(run_id, "warnings/step-000003.txt", str(tmp_path / "dl"))).read_text()
    assert text == "no informative group for 3 steps"


def _wandb_records(run_file: Path) -> list[Any]:
    """The records of a W&B run file, decoded with W&B's own protobuf messages (the file is a LevelDB-style log:
    a 7-byte ':W&B' header, then 32 KiB blocks of chunks, each with a 7-byte header of crc, length and type)."""
    from wandb.proto import wandb_internal_pb2

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    block, position, pending, records = 32768, 7, b"", []
    while position + 7 <= len(data):
        if block - position % block < 7:
            position += block - position % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position : position + 7])
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind == 0 and length == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()  # pyright: ignore[reportAttributeAccessIssue]
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


_WANDB_RUN = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_tracking import _record
from agentlightning.algorithm.tracking import make_tracker
_record(make_tracker({{"wandb": {{"project": "calc"}}}}, directory=Path({directory!r}), run_name="grpo-run"))
import wandb
wandb.teardown()
"""


def test_wandb_offline_run_reads_back_with_wandbs_own_records(tmp_path: Path) -> None:
    # W&B keeps process-wide state (its settings, its wandb-core service process): the run is made in a fresh
    # interpreter, so nothing an earlier test did to W&B in this process reaches it, and no service outlives it
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env["WANDB_DISABLE_GIT"] = "true"
    script = _WANDB_RUN.format(tests=str(Path(__file__).parent), directory=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_file,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    records = _wandb_records(run_file)
    history = []
    for record in records:
        if record.WhichOneof("record_type") == "history":
            items = {item.key or "/".join(item.nested_key): item.value_json for item in record.history.item}
            history.append(items)
    steps = {int(h["_step"]): h for h in history}
    kinds = [r.WhichOneof("record_type") for r in records]
    assert sorted(steps) == [1, 2, 3], f"history {history}; records {kinds}"
    assert [float(steps[s]["reward_mean"]) for s in (1, 2, 3)] == [0.25, 0.5, 0.75]
    assert steps[3]["warnings"] == '"no informative group for 3 steps"'
    runs = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert runs and runs[0].project == "calc" and runs[0].display_name == "grpo-run"
    config = {
        item.key or "/".join(item.nested_key): item.value_json
        for r in records
        if r.WhichOneof("record_type") == "config"
        for item in r.config.update
    }
    assert float(config["learning_rate"]) == 1e-5 and config["lora.rank"] == "8"
