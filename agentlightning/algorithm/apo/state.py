"""The mutable state of an APO search, and its conversion to and from a checkpoint.

Everything a later round depends on lives here: the beam, the best prompt so far, the history, the version counter,
the random generator, how many batches each stream has drawn, and the counters. A checkpoint is this state as JSON,
with prompts named by version (their texts live in the store's resources snapshots).
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from agentlightning.types import PromptTemplate

from .checkpoint import APOCheckpoint
from .types import APOHistoryEntry, APOStats, VersionedPromptTemplate

__all__ = ["SearchState"]


@dataclass
class SearchState:
    """The search state of one APO run (its `session` names the run's rollouts in the store)."""

    seed: int
    stats: APOStats
    session: str = field(default_factory=lambda: uuid.uuid4().hex)
    rng: random.Random = field(init=False)
    version_counter: int = 0
    beam: list[VersionedPromptTemplate] = field(default_factory=list)
    history: list[APOHistoryEntry] = field(default_factory=list)
    best: Optional[VersionedPromptTemplate] = None  # its `score` is on the whole validation set (None: not scored)
    batches_drawn: dict[str, int] = field(default_factory=lambda: {"gradient": 0, "val": 0})

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    @property
    def best_score(self) -> float:
        if self.best is None or self.best.score is None:
            return -math.inf
        return self.best.score

    @property
    def best_version(self) -> Optional[str]:
        return self.best.version if self.best is not None else None

    def new_version(self, template: PromptTemplate, score: Optional[float] = None) -> VersionedPromptTemplate:
        version = f"v{self.version_counter}"
        self.version_counter += 1
        return VersionedPromptTemplate(version=version, prompt_template=template, score=score)

    def set_best(self, prompt: VersionedPromptTemplate, score: Optional[float]) -> None:
        self.best = VersionedPromptTemplate(prompt.version, prompt.prompt_template, score)

    def to_checkpoint(self, run_id: str, fingerprint: str) -> APOCheckpoint:
        version, internal, gauss = self.rng.getstate()
        return APOCheckpoint(
            run_id=run_id,
            session=self.session,
            fingerprint=fingerprint,
            seed=self.seed,
            completed_rounds=self.stats.rounds_completed,
            version_counter=self.version_counter,
            beam=[{"version": prompt.version, "score": prompt.score} for prompt in self.beam],
            best={"version": self.best.version, "score": self.best.score} if self.best is not None else None,
            history=[entry.to_json() for entry in self.history],
            stats=self.stats.to_json(),
            rng_state=[version, list(internal), gauss],
            batches_drawn=dict(self.batches_drawn),
        )

    @classmethod
    def from_checkpoint(
        cls, checkpoint: APOCheckpoint, prompts: Mapping[str, PromptTemplate], stats: APOStats
    ) -> SearchState:
        """Rebuild the state; `prompts` maps each version the checkpoint names to its template. `stats` is updated
        in place (other components hold it)."""
        restored = APOStats.from_json(checkpoint.stats)
        stats.__dict__.update(restored.__dict__)
        state = cls(seed=checkpoint.seed, stats=stats, session=checkpoint.session)
        version, internal, gauss = checkpoint.rng_state
        state.rng.setstate((version, tuple(internal), gauss))
        state.version_counter = checkpoint.version_counter
        state.beam = [
            VersionedPromptTemplate(entry["version"], prompts[entry["version"]], entry.get("score"))
            for entry in checkpoint.beam
        ]
        state.history = [APOHistoryEntry.from_json(entry) for entry in checkpoint.history]
        if checkpoint.best is not None:
            best = checkpoint.best
            state.best = VersionedPromptTemplate(best["version"], prompts[best["version"]], best.get("score"))
        state.batches_drawn.update(checkpoint.batches_drawn)
        return state

    @staticmethod
    def versions_named(checkpoint: APOCheckpoint) -> list[str]:
        """Every prompt version a checkpoint refers to (to load from the store)."""
        names = [entry["version"] for entry in checkpoint.beam]
        if checkpoint.best is not None:
            names.append(checkpoint.best["version"])
        return list(dict.fromkeys(names))
