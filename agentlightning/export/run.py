"""`export_store`: stream a store's captured calls into a writer as SFT, RL or preference records.

Kinds (see docs/export.md for every column):
- `sft`: the calls as chat `messages` plus the exact `input_ids` and `assistant_masks`, the columns TRL's
  SFTTrainer trains on without conversion; `min_reward` keeps the rollouts that reached it (rejection sampling).
- `rl`: `prompt_ids`, `response_ids` with `loss_mask`, the rollout's `reward` and `group` (for group baselines).
- `preference`: the best and worst rollout of each group (`preference.py`), as `prompt`/`chosen`/`rejected`.
`unit="conversation"` (sft, rl) writes one record per stitched conversation, `unit="call"` one per LLM call.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import RolloutMode

from .preference import GroupExtremes, PairCandidates, preference_record
from .records import ExportedRollout, Unit, rl_records, sft_records
from .source import ReadCounts, RolloutReader
from .tool_turns import TextToolTurnsWriter, ToolTurns
from .writers import Kind, RecordWriter

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["ExportOptions", "ExportSummary", "ProgressCallback", "export_store"]

ProgressCallback = Callable[[str, int, Optional[int]], None]
"""Called with `(phase, done, total)`: phase "rollouts" (rollouts looked at, of `total` in the store) or "pairs"
(pairs written, of `total`)."""


@dataclass
class ExportOptions:
    """What to export (see the module docstring)."""

    kind: Kind = "sft"
    unit: Unit = "conversation"
    agent_match: Optional[str] = None
    min_reward: Optional[float] = None
    mode_in: Optional[Sequence[RolloutMode]] = None
    page_size: int = 200
    concurrency: int = 8
    tool_turns: ToolTurns = "openai"

    def __post_init__(self) -> None:
        if self.tool_turns not in ("openai", "text"):
            raise ValueError(f"unknown tool_turns {self.tool_turns!r}: use openai or text")
        if self.kind not in ("sft", "rl", "preference"):
            raise ValueError(f"unknown kind {self.kind!r}: use sft, rl or preference")
        if self.unit not in ("conversation", "call"):
            raise ValueError(f"unknown unit {self.unit!r}: use conversation or call")
        if self.kind == "preference" and self.unit != "conversation":
            raise ValueError("preference pairs compare whole conversations: --unit call applies to sft and rl only")


@dataclass
class ExportSummary:
    """What an export wrote and what it left out, by reason."""

    kind: str
    records: int = 0
    rollouts_seen: int = 0
    rollouts_exported: int = 0
    calls: int = 0
    conversations: int = 0
    continuations: int = 0
    drifted_calls: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    no_calls_example: Optional[str] = None
    seconds: float = 0.0

    @property
    def drift_rate(self) -> float:
        return self.drifted_calls / self.continuations if self.continuations else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "records": self.records,
            "rollouts_seen": self.rollouts_seen,
            "rollouts_exported": self.rollouts_exported,
            "calls": self.calls,
            "conversations": self.conversations,
            "continuations": self.continuations,
            "drifted_calls": self.drifted_calls,
            "drift_rate": round(self.drift_rate, 4),
            "skipped": dict(self.skipped),
            "no_calls_example": self.no_calls_example,
            "seconds": round(self.seconds, 3),
        }


def _count_calls(summary: ExportSummary, rollout: ExportedRollout) -> None:
    report = rollout.stitched
    summary.calls += report.calls
    summary.conversations += len(report.sequences)
    summary.continuations += report.continuations
    summary.drifted_calls += report.drifted


async def export_store(
    store: LightningStore,
    writer: RecordWriter,
    options: Optional[ExportOptions] = None,
    progress: Optional[ProgressCallback] = None,
) -> ExportSummary:
    """Write the records of `store`'s succeeded rollouts to `writer` (which the caller closes or aborts)."""
    options = options or ExportOptions()
    if options.tool_turns == "text":
        writer = TextToolTurnsWriter(writer)
    started = time.monotonic()
    reader = RolloutReader(
        store,
        agent_match=options.agent_match,
        mode_in=options.mode_in,
        page_size=options.page_size,
        concurrency=options.concurrency,
    )
    summary = ExportSummary(kind=options.kind)
    skipped: Counter[str] = Counter()
    report = progress or (lambda phase, done, total: None)
    if options.kind == "preference":
        await _export_pairs(reader, writer, options, summary, skipped, report)
    else:
        build = sft_records if options.kind == "sft" else rl_records
        async for rollout in reader.rollouts():
            report("rollouts", reader.counts.rollouts_seen, reader.total)
            if options.min_reward is not None and (rollout.reward is None or rollout.reward < options.min_reward):
                skipped["no reward (with --min-reward)" if rollout.reward is None else "reward below --min-reward"] += 1
                continue
            _count_calls(summary, rollout)
            for record in build(rollout, options.unit):
                writer.write(record)
                summary.records += 1
            summary.rollouts_exported += 1
    report("rollouts", reader.counts.rollouts_seen, reader.total)
    skipped.update(reader.counts.skipped)
    summary.rollouts_seen = reader.counts.rollouts_seen
    summary.skipped = dict(skipped.most_common())
    summary.no_calls_example = reader.counts.no_calls_example
    summary.seconds = time.monotonic() - started
    return summary


async def _export_pairs(
    reader: RolloutReader,
    writer: RecordWriter,
    options: ExportOptions,
    summary: ExportSummary,
    skipped: Counter[str],
    report: ProgressCallback,
) -> None:
    candidates = PairCandidates()
    async for rollout in reader.rollouts():
        report("rollouts", reader.counts.rollouts_seen, reader.total)
        _count_calls(summary, rollout)
        candidates.add(rollout)
    pairs: list[GroupExtremes] = list(candidates.pairs(options.min_reward))
    skipped.update(candidates.skipped)
    candidates.groups.clear()
    second = ReadCounts()
    for start in range(0, len(pairs), options.concurrency):
        chunk = pairs[start : start + options.concurrency]
        sides = await asyncio.gather(
            *(reader.read(ref, second) for extremes in chunk for ref in (extremes.best, extremes.worst))
        )
        for index, extremes in enumerate(chunk):
            chosen, rejected = sides[2 * index], sides[2 * index + 1]
            if chosen is None or rejected is None:
                skipped["pair unreadable on the second pass"] += 1
                continue
            writer.write(preference_record(chosen, rejected, extremes.size))
            summary.records += 1
            summary.rollouts_exported += 2  # a rollout belongs to one group, so to one pair at most
        report("pairs", min(start + len(chunk), len(pairs)), len(pairs))
