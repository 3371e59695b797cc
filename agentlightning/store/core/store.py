"""`CoreLightningStore`: the LightningStore contract implemented once over a `Storage` backend.

The core validates arguments, runs the state machine (`lifecycle`), schedules health scans and wakes waiters.
Backends (memory, SQLite, PostgreSQL) subclass it and supply storage only. The operations are grouped by area in
`core_rollouts`, `core_attempts` and `core_resources` over the shared `core_base`.
"""

from __future__ import annotations

from agentlightning.store.core.attempts import AttemptAndSpanOperations
from agentlightning.store.core.resources import ResourceAndWorkerOperations
from agentlightning.store.core.rollouts import RolloutOperations
from agentlightning.store.core.shared import CoreStoreBase

__all__ = ["CoreLightningStore", "CoreStoreBase"]


class CoreLightningStore(RolloutOperations, AttemptAndSpanOperations, ResourceAndWorkerOperations):
    """Implements every LightningStore method on top of `storage`.

    Health rules (timeouts, unresponsiveness) are checked before most operations; `scan_debounce_seconds` limits how
    often a scan may run (0 checks on every call; backends that track deadlines make the check cheap).
    """
