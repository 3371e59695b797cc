"""The data APO works with: rollout results shown to the critic, versioned prompts, the history and the counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from agentlightning.types import PromptTemplate

__all__ = ["APOHistoryEntry", "APOStats", "RolloutResultForAPO", "VersionedPromptTemplate"]


class RolloutResultForAPO(TypedDict):
    """One finished rollout as the critique prompt sees it (JSON-serialisable)."""

    status: str
    final_reward: Optional[float]
    spans: list[dict[str, Any]]
    messages: list[Any]
    rollout_id: NotRequired[str]
    input: NotRequired[Any]


@dataclass
class VersionedPromptTemplate:
    """A prompt template under APO's version name ("v0" is the seed); `score` is its latest validation score."""

    version: str
    prompt_template: PromptTemplate
    score: Optional[float] = None


HistoryKind = Literal["seed", "candidate", "leader"]


@dataclass(frozen=True)
class APOHistoryEntry:
    """One scored prompt of a run.

    `kind` is "seed" (the seed on the full validation set, round 0), "candidate" (a prompt scored on the round's
    validation batch; `selected` tells whether it entered the beam) or "leader" (the beam's best prompt of the round
    on the full validation set).
    """

    round: int
    version: str
    prompt: str
    score: Optional[float]
    kind: HistoryKind
    selected: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> APOHistoryEntry:
        return cls(**data)


@dataclass
class APOStats:
    """Counters of a run (kept across resumption). Skips are counted by reason, never fatal."""

    rounds_completed: int = 0
    rollouts_enqueued: int = 0
    rollouts_reused: int = 0
    rollouts_unfinished: int = 0
    rollouts_without_reward: int = 0
    rollouts_failed: int = 0
    llm_calls: int = 0
    llm_retries: int = 0
    llm_failures: int = 0
    candidates_proposed: int = 0
    candidates_accepted: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> APOStats:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)
