"""Short names of the execution strategies accepted by `Trainer(strategy=...)`."""

from __future__ import annotations

__all__ = ["ExecutionStrategyRegistry"]

ExecutionStrategyRegistry: dict[str, str] = {
    "shm": "agentlightning.execution.shared_memory.SharedMemoryExecutionStrategy",
    "cs": "agentlightning.execution.client_server.ClientServerExecutionStrategy",
    "ray": "agentlightning.execution.ray.RayExecutionStrategy",
}
