"""A GRPO run's health as it trains: each step's record and active warnings in its history entry (`health`,
`warnings`), each warning logged once when it starts, and the summary and verdict at the end (see `health`,
`health_rules`, `health_verdict`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from .health import StrataKey, step_health, stratum_rewards
from .health_rules import health_warnings
from .health_verdict import held_out_verdict, warning_steps

if TYPE_CHECKING:
    from ..sampling.rounds import SampledGroups

__all__ = ["RunHealth", "health_summary", "log_verdict"]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")


class RunHealth:
    """Adds each step's health record and warnings to its history entry; logs a warning when it starts."""

    def __init__(self, balance_by: Optional[StrataKey] = None) -> None:
        if balance_by is not None and not callable(balance_by):
            raise TypeError(f"balance_by must be a callable (task -> its kind) or None, got {balance_by!r}")
        self.balance_by = balance_by

    def observe(
        self,
        entry: dict[str, Any],
        history: Sequence[Mapping[str, Any]],
        metrics: Mapping[str, Any],
        sampled: SampledGroups,
        dataset: Any,
    ) -> list[dict[str, Any]]:
        """Set `entry["health"]` and `entry["warnings"]` (the warnings active at this step, each with the step it
        `since` started) for the step whose earlier steps are `history`; return the warnings that started now."""
        calls = [call for item in sampled.data for call in item.calls]
        strata = None
        if self.balance_by is not None:
            tasks = [dataset[sampled.indices[group]] for group in sampled.groups]
            strata = stratum_rewards(tasks, [item.reward for item in sampled.data], self.balance_by)
        entry["health"] = step_health(entry, metrics, calls, strata)
        records = [e["health"] for e in history if isinstance(e.get("health"), dict)] + [entry["health"]]
        previous = {w["code"]: w for w in (history[-1].get("warnings") or [])} if history else {}
        active: list[dict[str, Any]] = []
        started: list[dict[str, Any]] = []
        for warning in health_warnings(records):
            item = warning.to_dict()
            item["since"] = (
                previous[warning.code].get("since", warning.step) if warning.code in previous else warning.step
            )
            active.append(item)
            if warning.code not in previous:
                started.append(item)
                logger.warning("GRPO step %s: %s %s [%s]", warning.step, warning.message, warning.fix, warning.code)
        entry["warnings"] = active
        return started


def health_summary(history: Sequence[Mapping[str, Any]], evaluations: Sequence[Any]) -> dict[str, Any]:
    """The health part of a run's summary: every warning seen (first and last step, steps active, its latest
    message and fix), those active at the last step, and the held-out verdict."""
    seen: dict[str, dict[str, Any]] = {}
    for entry in history:
        for warning in entry.get("warnings") or []:
            item = seen.setdefault(warning["code"], {"code": warning["code"], "first_step": entry.get("step")})
            item.update(last_step=entry.get("step"), message=warning["message"], fix=warning["fix"])
    for code, steps in warning_steps(history).items():
        seen[code]["steps"] = steps
    reports = {getattr(e, "label", None): e.to_dict() for e in evaluations if hasattr(e, "to_dict")}
    return {
        "warnings": list(seen.values()),
        "active_warnings": list(history[-1].get("warnings") or []) if history else [],
        "verdict": held_out_verdict(reports.get("before"), reports.get("after"), history),
    }


def log_verdict(history: Sequence[Mapping[str, Any]], evaluations: Sequence[Any]) -> dict[str, Any]:
    """Log the held-out verdict (INFO when the score rose, else WARNING) and return it."""
    verdict = health_summary(history, evaluations)["verdict"]
    if verdict["moved"] is not None:
        log = logger.info if verdict["direction"] == "up" else logger.warning
        log("GRPO verdict: %s", verdict["message"])
    return verdict
