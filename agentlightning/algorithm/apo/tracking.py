"""What an APO run sends to experiment tracking (`APO(tracking=...)`): its settings once, and after the seed's
scoring (round 0) and every round the scores and counters of the search, as pure functions of its state."""

from __future__ import annotations

import math
from typing import Any, Optional

from .state import SearchState

__all__ = ["SETTINGS", "round_metrics", "run_settings"]

SETTINGS = (
    "run_id",
    "gradient_model",
    "apply_edit_model",
    "diversity_temperature",
    "gradient_batch_size",
    "val_batch_size",
    "beam_width",
    "branch_factor",
    "beam_rounds",
    "selection",
    "seed",
    "resample_scores",
)
"""The APO settings a tracker records."""


def run_settings(apo: Any) -> dict[str, Any]:
    """The settings of an APO instance that a tracker records (`SETTINGS`)."""
    return {name: getattr(apo, name, None) for name in SETTINGS}


def _finite(value: Optional[float]) -> Optional[float]:
    return value if value is not None and math.isfinite(value) else None


def round_metrics(state: SearchState, round_num: int) -> dict[str, Any]:
    """The metrics of round `round_num` (0: the seed): the best validation score so far, the round's leader and
    candidate scores, and the run's counters (rollouts, optimizer calls, candidates)."""
    entries = [entry for entry in state.history if entry.round == round_num]
    candidates = [e.score for e in entries if e.kind == "candidate" and e.score is not None]
    leader = [e.score for e in entries if e.kind in ("leader", "seed") and e.score is not None]
    stats = state.stats
    return {
        "best_score": _finite(state.best_score),
        "leader_score": leader[-1] if leader else None,
        "candidates": {
            "scored": len(candidates),
            "selected": sum(1 for e in entries if e.kind == "candidate" and e.selected),
            "score_mean": sum(candidates) / len(candidates) if candidates else None,
            "score_max": max(candidates) if candidates else None,
        },
        "rollouts": {
            "enqueued": stats.rollouts_enqueued,
            "reused": stats.rollouts_reused,
            "failed": stats.rollouts_failed,
            "unfinished": stats.rollouts_unfinished,
        },
        "optimizer": {"calls": stats.llm_calls, "retries": stats.llm_retries, "failures": stats.llm_failures},
    }
