"""APO's resumable state, kept in the store itself (no side file).

After every completed round APO writes a checkpoint: the beam (versions and scores), the best prompt, the history,
the counters and the random state. The prompt texts live in the store's resources (one snapshot per version, id
`<run_id>-<version>`); the rest is JSON in the metadata of one bookkeeping rollout of the run, whose input is
`{"apo_checkpoint": <run_id>}` and which never enters the queue (it is created already started and marked
succeeded; its metadata marks it as bookkeeping, so progress counts leave it out). A restarted run finds that rollout, reloads the prompts from their snapshots, and reuses every rollout
its earlier life finished (found by `metadata["apo"]["session"]`), so an interrupted round only redoes its
optimizer calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import PromptTemplate, Rollout
from agentlightning.utils.bookkeeping import bookkeeping_metadata

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["APOCheckpoint", "CheckpointRecord", "load_prompts", "scan_run"]

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 1
_PAGE = 500
_KEY = "apo_checkpoint"


@dataclass
class APOCheckpoint:
    """Everything a run needs to continue after its last completed round."""

    run_id: str
    session: str
    fingerprint: str
    seed: int
    completed_rounds: int
    version_counter: int
    beam: list[dict[str, Any]]  # [{"version": "v3", "score": 0.5}, ...]
    best: Optional[dict[str, Any]]  # {"version": ..., "score": ...}
    history: list[dict[str, Any]]
    stats: dict[str, Any]
    rng_state: list[Any]
    batches_drawn: dict[str, int] = field(default_factory=dict)
    format: int = CHECKPOINT_FORMAT

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> APOCheckpoint:
        if data.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"unsupported APO checkpoint format {data.get('format')!r} (expected {CHECKPOINT_FORMAT})")
        names = cls.__dataclass_fields__
        missing = [name for name in names if name not in data and name not in ("batches_drawn", "format")]
        if missing:
            raise ValueError(f"APO checkpoint is missing {missing}")
        return cls(**{name: data[name] for name in names if name in data})


def is_checkpoint_rollout(rollout: Rollout, run_id: str) -> bool:
    return isinstance(rollout.input, dict) and rollout.input == {_KEY: run_id}


async def scan_run(store: LightningStore, run_id: str) -> tuple[Optional[Rollout], list[Rollout]]:
    """The run's checkpoint rollout (if any) and every rollout whose metadata names this run, in creation order."""
    record: Optional[Rollout] = None
    mine: list[Rollout] = []
    offset = 0
    while True:
        page = list(await store.query_rollouts(limit=_PAGE, offset=offset))
        for rollout in page:
            if is_checkpoint_rollout(rollout, run_id):
                record = rollout
                continue
            meta = (rollout.metadata or {}).get("apo")
            if isinstance(meta, dict) and meta.get("run_id") == run_id:
                mine.append(rollout)
        if len(page) < _PAGE:
            return record, mine
        offset += len(page)


async def load_prompts(
    store: LightningStore, run_id: str, resource_name: str, versions: Sequence[str]
) -> dict[str, PromptTemplate]:
    """The templates of the named versions, read from their resources snapshots `<run_id>-<version>`."""
    prompts: dict[str, PromptTemplate] = {}
    for version in versions:
        snapshot = await store.get_resources_by_id(f"{run_id}-{version}")
        template = snapshot.resources.get(resource_name) if snapshot is not None else None
        if not isinstance(template, PromptTemplate):
            raise ValueError(
                f"The checkpoint of APO run {run_id!r} names prompt {version}, but resources {run_id}-{version} "
                f"hold no PromptTemplate {resource_name!r}"
            )
        prompts[version] = template
    return prompts


class CheckpointRecord:
    """Reads and writes the checkpoint in the metadata of the run's bookkeeping rollout."""

    def __init__(self, store: LightningStore, run_id: str, rollout_id: Optional[str] = None) -> None:
        self.store = store
        self.run_id = run_id
        self.rollout_id = rollout_id

    @staticmethod
    def parse(rollout: Rollout) -> Optional[APOCheckpoint]:
        data = (rollout.metadata or {}).get(_KEY)
        if not isinstance(data, dict):
            return None
        return APOCheckpoint.from_json(data)

    async def save(self, checkpoint: APOCheckpoint) -> None:
        # Marked as bookkeeping so that progress counts (Trainer summary, dashboard) leave it out.
        metadata = {_KEY: checkpoint.to_json(), **bookkeeping_metadata("apo_checkpoint")}
        if self.rollout_id is None:
            started = await self.store.start_rollout(input={_KEY: self.run_id}, metadata=metadata)
            self.rollout_id = started.rollout_id
            await self.store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded")
        else:
            await self.store.update_rollout(self.rollout_id, metadata=metadata)
