"""What a GRPO run sends to experiment tracking (`GRPO(tracking=...)`): its settings when it starts, each step's
history entry (every number in it, nested records as `a/b` names: rewards, groups, drift, seconds per part, skips,
the per-agent records and the health record) at that step, each evaluation's scores as `eval/<label>/...`, and
the run's warnings as texts. Pure mapping from GRPO's events; the trackers live in `algorithm.tracking`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Optional

from ...tracking import Tracker, flatten_metrics

__all__ = ["EVALUATION_METRICS", "track_event", "track_or_stop"]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")  # GRPO's log lines keep its logger's name

EVALUATION_METRICS = ("mean_reward", "n", "failed", "without_reward", "unfinished")
"""The numbers of an evaluation a tracker records (its items stay in summary.json)."""


def _warnings(payload: Mapping[str, Any]) -> list[str]:
    found = payload.get("warnings")
    if not isinstance(found, list):
        health = payload.get("health")
        found = health.get("warnings") if isinstance(health, Mapping) else None
    texts = []
    for warning in found or []:
        if isinstance(warning, Mapping):
            texts.append(str(warning.get("message") or warning))
        else:
            texts.append(str(warning))
    return texts


def track_event(tracker: Optional[Tracker], kind: str, payload: Mapping[str, Any], step: int) -> None:
    """Send one GRPO event to `tracker` (None: nothing); `step` is the run's step when the event happened."""
    if tracker is None:
        return
    if kind == "step":
        at = int(payload.get("step", step))
        tracker.log_metrics(flatten_metrics({k: v for k, v in payload.items() if k != "step"}), at)
        for text in _warnings(payload):
            tracker.log_text("warnings", text, at)
    elif kind == "evaluation":
        label = str(payload.get("label", "evaluation"))
        numbers = {name: payload.get(name) for name in EVALUATION_METRICS}
        tracker.log_metrics(flatten_metrics({"eval": {label: numbers}}), int(payload.get("step", step)))
    elif kind == "verdict":
        tracker.log_text("verdict", str(payload.get("message", payload)), step)


def track_or_stop(tracker: Optional[Tracker], kind: str, payload: Mapping[str, Any], step: int) -> Optional[Tracker]:
    """`track_event`, and the tracker to use from now on: None once it failed (logged; tracking never stops
    training)."""
    try:
        track_event(tracker, kind, payload, step)
    except Exception as exc:
        logger.warning("Experiment tracking failed on %s (%r); it is turned off for this run", kind, exc)
        return None
    return tracker
