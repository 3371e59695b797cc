"""Bookkeeping rollouts: records an algorithm keeps in the store as rollouts (APO's checkpoint) that are not work.

They are created already finished and never enter the queue; progress counts (the Trainer's summary, the
dashboard's overview) leave them out. A rollout is one when its metadata holds `BOOKKEEPING_KEY` (the value names
the kind, e.g. "apo_checkpoint").
"""

from __future__ import annotations

from typing import Any

__all__ = ["BOOKKEEPING_KEY", "bookkeeping_metadata", "is_bookkeeping_rollout"]

BOOKKEEPING_KEY = "agentlightning.bookkeeping"


def bookkeeping_metadata(kind: str) -> dict[str, Any]:
    """The metadata entry that marks a rollout as bookkeeping of `kind`."""
    return {BOOKKEEPING_KEY: kind}


def is_bookkeeping_rollout(rollout: Any) -> bool:
    """Whether `rollout` (a Rollout, or its JSON dict) is a bookkeeping record rather than work."""
    metadata = rollout.get("metadata") if isinstance(rollout, dict) else getattr(rollout, "metadata", None)
    return isinstance(metadata, dict) and bool(metadata.get(BOOKKEEPING_KEY))
