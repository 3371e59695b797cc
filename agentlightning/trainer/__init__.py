"""The Trainer and its component builder."""

from __future__ import annotations

from .init_utils import build_component, instantiate_component, instantiate_from_spec, load_class
from .registry import ExecutionStrategyRegistry
from .snapshot import ProgressSnapshot, RunSummary
from .trainer import Trainer

__all__ = [
    "ExecutionStrategyRegistry",
    "ProgressSnapshot",
    "RunSummary",
    "Trainer",
    "build_component",
    "instantiate_component",
    "instantiate_from_spec",
    "load_class",
]
