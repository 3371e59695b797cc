"""Experiment tracking: an algorithm's settings, per-step metrics and warnings, written to the tracking libraries
users already use (TensorBoard, MLflow, Weights & Biases), chosen by one option.

    GRPO(..., tracking="tensorboard")                       # <output_dir>/tensorboard
    GRPO(..., tracking=["mlflow", "wandb"])                 # <output_dir>/mlruns, <output_dir>/wandb (offline)
    APO(..., tracking={"mlflow": {"tracking_uri": "http://127.0.0.1:5000", "experiment": "prompts"}})

Each library is an optional extra (`pip install 'agentlightning[tracking]'`); choosing one that is not installed
fails at once with the command that installs it. A tracker that fails during a run is logged and turned off:
tracking never stops training. See docs/algorithms.md ("Experiment tracking").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from .base import MultiTracker, Tracker, flatten_metrics, flatten_params

__all__ = [
    "TRACKERS",
    "MultiTracker",
    "Tracker",
    "TrackingOption",
    "flatten_metrics",
    "flatten_params",
    "make_tracker",
]

TrackingOption = Union[None, str, Tracker, Sequence[Union[str, Tracker]], Mapping[str, Mapping[str, Any]]]
"""None (no tracking), a library name, a `Tracker`, a list of those, or `{name: options}`."""


def _tensorboard(directory: Path, run_name: str, options: Mapping[str, Any]) -> Tracker:
    from .tensorboard import TensorBoardTracker

    return TensorBoardTracker(**{"log_dir": directory / "tensorboard", **options})


def _mlflow(directory: Path, run_name: str, options: Mapping[str, Any]) -> Tracker:
    from .mlflow import MLflowTracker

    return MLflowTracker(**{"tracking_uri": directory / "mlruns", "run_name": run_name, **options})


def _wandb(directory: Path, run_name: str, options: Mapping[str, Any]) -> Tracker:
    from .wandb import WandbTracker

    return WandbTracker(**{"dir": directory, "run_name": run_name, **options})


TRACKERS: dict[str, Callable[[Path, str, Mapping[str, Any]], Tracker]] = {
    "tensorboard": _tensorboard,
    "mlflow": _mlflow,
    "wandb": _wandb,
}
"""The libraries `tracking=` names, each a factory `(directory, run name, options) -> Tracker`."""


def _one(name: str, options: Any, directory: Path, run_name: str) -> Tracker:
    factory = TRACKERS.get(name)
    if factory is None:
        raise ValueError(f"Unknown tracking library {name!r}; known: {sorted(TRACKERS)} (or pass a Tracker)")
    if not isinstance(options, Mapping):
        raise TypeError(f"tracking options of {name!r} must be a dict of keyword arguments, got {options!r}")
    return factory(directory, run_name, options)


def make_tracker(option: TrackingOption, *, directory: Union[str, Path], run_name: str) -> Optional[Tracker]:
    """The tracker `option` asks for (None: none). Local files (TensorBoard events, the MLflow file store, W&B's
    offline runs) go under `directory` unless the options say otherwise."""
    if option is None:
        return None
    base = Path(directory)
    if isinstance(option, Tracker):
        return option
    if isinstance(option, str):
        return _one(option, {}, base, run_name)
    trackers: list[Tracker] = []
    try:
        if isinstance(option, Mapping):
            for name, options in option.items():
                trackers.append(_one(str(name), options, base, run_name))
        elif isinstance(option, Sequence):
            for item in option:
                if isinstance(item, Tracker):
                    trackers.append(item)
                elif isinstance(item, str):
                    trackers.append(_one(item, {}, base, run_name))
                else:
                    raise TypeError(f"tracking list items must be library names or Trackers, got {item!r}")
        else:
            raise TypeError(
                "tracking must be None, a library name, a Tracker, a list of those or {name: options}, got "
                f"{option!r}"
            )
    except BaseException:
        for tracker in trackers:
            tracker.close()
        raise
    if not trackers:
        return None
    return trackers[0] if len(trackers) == 1 else MultiTracker(trackers)
