"""Execution strategies: where the algorithm and the runners run, and how they stop.

`SharedMemoryExecutionStrategy` ("shm": threads of one process), `ClientServerExecutionStrategy` ("cs": the store
served over HTTP, runners as processes; the Trainer's default) and `RayExecutionStrategy` ("ray": runners as Ray
actors; needs the `ray` extra, imported on first use).
"""

from __future__ import annotations

from typing import Any

from .base import AlgorithmBundle, ExecutionStrategy, RunnerBundle, resolve_managed_store_flag
from .client_server import ClientServerExecutionStrategy
from .events import ExecutionEvent, MultiprocessingEvent, ThreadingEvent
from .shared_memory import SharedMemoryExecutionStrategy

__all__ = [
    "AlgorithmBundle",
    "ClientServerExecutionStrategy",
    "ExecutionEvent",
    "ExecutionStrategy",
    "MultiprocessingEvent",
    "RayExecutionStrategy",
    "RunnerBundle",
    "SharedMemoryExecutionStrategy",
    "ThreadingEvent",
    "resolve_managed_store_flag",
]


def __getattr__(name: str) -> Any:
    if name == "RayExecutionStrategy":
        from .ray import RayExecutionStrategy

        return RayExecutionStrategy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
