"""Resource and worker operations of `CoreLightningStore`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Optional, Union

from agentlightning.store.base import (
    UNSET,
    Unset,
)
from agentlightning.store.core import clock
from agentlightning.store.core.query import (
    RESOURCES_FIELDS,
    WORKER_FIELDS,
    build_query,
)
from agentlightning.store.core.records import generate_resources_id, owned_copy, page_of
from agentlightning.store.core.shared import CoreStoreBase
from agentlightning.store.core.validation import (
    check_finite,
    check_id,
    check_resources,
    check_status_list,
)
from agentlightning.store.errors import (
    InvalidArgumentTypeError,
)
from agentlightning.types import (
    NamedResources,
    ResourcesUpdate,
    Worker,
)

WORKER_STATUSES = ("idle", "busy", "unknown")


def _own_copy(resources: NamedResources) -> NamedResources:
    """Snapshots are immutable: the store keeps deep copies of what it is given and hands out deep copies."""
    return {name: resource.model_copy(deep=True) for name, resource in resources.items()}


class ResourceAndWorkerOperations(CoreStoreBase):
    """Versioned resource snapshots and worker records."""

    # ---------------------------------------------------------------------------------------------------- resources
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        checked = _own_copy(check_resources(resources))
        now = clock.now()
        update = ResourcesUpdate(
            resources_id=generate_resources_id(), create_time=now, update_time=now, version=1, resources=checked
        )
        async with self._storage.transaction() as tx:
            await tx.put_resources(update)
        return update.model_copy(deep=True)

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        resources_id = check_id(resources_id, "resources_id")
        checked = _own_copy(check_resources(resources))
        await self._scan_health()
        now = clock.now()
        async with self._storage.transaction() as tx:
            existing = await tx.get_resources(resources_id)
            update = ResourcesUpdate(
                resources_id=resources_id,
                create_time=existing.create_time if existing is not None else now,
                update_time=max(now, existing.update_time) if existing is not None else now,
                version=existing.version + 1 if existing is not None else 1,
                resources=checked,
            )
            await tx.put_resources(update)
        return update.model_copy(deep=True)

    async def get_resources_by_id(self, resources_id: str) -> Optional[ResourcesUpdate]:
        resources_id = check_id(resources_id, "resources_id")
        async with self._storage.transaction(write=False) as tx:
            update = await tx.get_resources(resources_id)
        return update.model_copy(deep=True) if update is not None else None

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        async with self._storage.transaction(write=False) as tx:
            update = await tx.get_latest_resources()
        return update.model_copy(deep=True) if update is not None else None

    async def query_resources(
        self,
        *,
        resources_id: Optional[str] = None,
        resources_id_contains: Optional[str] = None,
        sort_by: Optional[str] = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[ResourcesUpdate]:
        if resources_id is not None:
            check_id(resources_id, "resources_id")
        query = build_query(
            "resources",
            RESOURCES_FIELDS,
            exact={"resources_id": resources_id},
            contains={"resources_id": resources_id_contains},
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )
        async with self._storage.transaction(write=False) as tx:
            updates, total = await tx.query_resources(query)
        return page_of([update.model_copy(deep=True) for update in updates], total, query)

    # ------------------------------------------------------------------------------------------------------ workers
    async def query_workers(
        self,
        *,
        status_in: Optional[Sequence[str]] = None,
        worker_id_contains: Optional[str] = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: Optional[str] = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> Sequence[Worker]:
        statuses = check_status_list(status_in, WORKER_STATUSES, "status_in")
        query = build_query(
            "workers",
            WORKER_FIELDS,
            within={"status": statuses},
            contains={"worker_id": worker_id_contains},
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )
        await self._scan_health()
        async with self._storage.transaction(write=False) as tx:
            workers, total = await tx.query_workers(query)
        return page_of([owned_copy(worker) for worker in workers], total, query)

    async def get_worker_by_id(self, worker_id: str) -> Optional[Worker]:
        worker_id = check_id(worker_id, "worker_id")
        async with self._storage.transaction(write=False) as tx:
            worker = (await tx.get_workers([worker_id])).get(worker_id)
        return owned_copy(worker) if worker is not None else None

    async def update_worker(self, worker_id: str, heartbeat_stats: Union[dict[str, Any], Unset] = UNSET) -> Worker:
        worker_id = check_id(worker_id, "worker_id")
        if not isinstance(heartbeat_stats, Unset) and not isinstance(heartbeat_stats, dict):
            raise InvalidArgumentTypeError(
                f"heartbeat_stats must be a dict (omit it to record a bare heartbeat), got {heartbeat_stats!r}"
            )
        if isinstance(heartbeat_stats, dict):
            check_finite(heartbeat_stats, "heartbeat_stats")
        now = clock.now()
        async with self._storage.transaction() as tx:
            stored = (await tx.get_workers([worker_id])).get(worker_id)
            worker = owned_copy(stored) if stored is not None else Worker(worker_id=worker_id)
            worker.last_heartbeat_time = now
            if isinstance(heartbeat_stats, dict):
                worker.heartbeat_stats = dict(heartbeat_stats)
            await tx.put_workers([worker])
        return owned_copy(worker)
