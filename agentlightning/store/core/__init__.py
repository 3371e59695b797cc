"""`CoreLightningStore`: the LightningStore contract implemented once over a `Storage` backend.

The core validates arguments, runs the state machine (`lifecycle`), schedules health scans and wakes waiters.
Backends (memory, SQLite, PostgreSQL) subclass it and supply storage only. Its modules, by concern:

- `rollouts`, `attempts`, `resources`: the operations, grouped by area, over the shared part in `shared` (storage,
  health scans, waiter wake-ups, and the one path of the frequent writes);
- `lifecycle`: the rollout/attempt/worker state machine as plain functions;
- `storage`: the storage interface, and the change set an operation writes through it;
- `grouping`: group commit (concurrent calls share a transaction) and riders (writes that ride along);
- `records`: ids, caller-owned copies, next attempts, result pages;
- `query`, `validation`: validated query descriptions and argument checks at the API edge;
- `concurrency`: locks and wake-ups across threads and event loops; `clock`: the one wall clock, replaceable in tests.
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
