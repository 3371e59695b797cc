"""Plain-language warnings about a GRPO run, from its step health records (`health.step_health`), as pure rules.

Each rule reads the records of the steps so far (oldest first) and returns a `HealthWarning` (a code, what is wrong
in plain words, what to try) while its failure pattern holds, else None. `health_warnings` applies them all. The
thresholds are the named constants below; docs/algorithms.md ("Reading a run's health") explains each warning.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

__all__ = [
    "DRIFT_WARN_RATE",
    "ENTROPY_DROP_FRACTION",
    "ENTROPY_WINDOW",
    "INVALID_TOOL_CALLS_WARN",
    "MIN_TOOL_CALLS",
    "NO_SIGNAL_STEPS",
    "RULES",
    "SAMPLER_GAP_WARN",
    "STRATUM_GAP_WARN",
    "STRATUM_WINDOW",
    "TOOL_COLLAPSE_SHARE",
    "TOOL_WINDOW",
    "TRUNCATION_WARN_RATE",
    "HealthWarning",
    "health_warnings",
]

NO_SIGNAL_STEPS = 3
"""Consecutive steps without an informative group before `no_signal` warns."""
TOOL_COLLAPSE_SHARE = 0.9
"""Share of the tool calls picking one tool (of several offered) at which `tool_collapse` warns."""
TOOL_WINDOW = 3
"""Steps whose tool calls `tool_collapse` pools."""
MIN_TOOL_CALLS = 10
"""Tool calls those steps need before `tool_collapse` judges their concentration."""
ENTROPY_WINDOW = 3
"""Steps averaged at the start and at the end of the run by `entropy_collapse` (it needs twice as many)."""
ENTROPY_DROP_FRACTION = 0.3
"""`entropy_collapse` warns when the recent entropy is below this fraction of the first steps' entropy."""
TRUNCATION_WARN_RATE = 0.4
"""Share of a step's LLM calls cut off by the token limit at which `truncation` warns."""
SAMPLER_GAP_WARN = 0.1
"""Mean absolute per-token log-probability gap (nats) between sampler and trainer at which `sampler_gap` warns."""
DRIFT_WARN_RATE = 0.2
"""Share of a step's continuing calls that did not extend their conversation at which `drift` warns."""
INVALID_TOOL_CALLS_WARN = 0.2
"""Share of a step's tool calls that do not parse at which `invalid_tool_calls` warns (with at least 5 calls)."""
STRATUM_GAP_WARN = 0.5
"""Gap between the best and the worst stratum's mean reward (last `STRATUM_WINDOW` steps) at which `stratum_gap`
warns."""
STRATUM_WINDOW = 3
"""Steps whose rewards per stratum `stratum_gap` pools."""
_MIN_INVALID_TOOL_CALLS = 5


@dataclass(frozen=True)
class HealthWarning:
    """One failure pattern seen in a run: `code` (stable), `message` (what is wrong), `fix` (what to try) and
    `step` (the step it was found at)."""

    code: str
    message: str
    fix: str
    step: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Record = Mapping[str, Any]


def _values(records: Sequence[Record], name: str) -> list[float]:
    return [float(r[name]) for r in records if isinstance(r.get(name), (int, float))]


def no_signal(records: Sequence[Record]) -> Optional[HealthWarning]:
    """No informative group in the last `NO_SIGNAL_STEPS` steps: every group's rewards were equal."""
    recent = [r for r in records if r.get("informative_share") is not None][-NO_SIGNAL_STEPS:]
    if len(recent) < NO_SIGNAL_STEPS or any(r["informative_share"] > 0 for r in recent):
        return None
    rewards = _values(recent, "reward_mean")
    level = f" (mean reward {statistics.fmean(rewards):.2f})" if rewards else ""
    return HealthWarning(
        "no_signal",
        f"No informative group for {NO_SIGNAL_STEPS} steps{level}: every group's rollouts got the same reward, so "
        "there is nothing to learn from. The tasks are too hard or too easy for this model.",
        "If every answer fails, give easier tasks, a larger model or a reward with partial credit; if every answer "
        "succeeds, give harder tasks. A higher temperature or group_size makes a group's answers differ more.",
    )


def tool_collapse(records: Sequence[Record]) -> Optional[HealthWarning]:
    """One tool takes `TOOL_COLLAPSE_SHARE` of the tool calls of the last `TOOL_WINDOW` steps while several are
    offered (the policy calls it for everything)."""
    recent = [r["tool_calls"] for r in records[-TOOL_WINDOW:] if r.get("tool_calls")]
    chosen: Counter[str] = Counter()
    offered: set[str] = set()
    for stats in recent:
        chosen.update(stats.get("chosen") or {})
        offered.update(stats.get("offered") or [])
    total = sum(chosen.values())
    if total < MIN_TOOL_CALLS or not chosen:
        return None
    tools = offered or {name for r in records if r.get("tool_calls") for name in r["tool_calls"].get("chosen") or {}}
    name, count = chosen.most_common(1)[0]
    if len(tools) < 2 or count / total < TOOL_COLLAPSE_SHARE:
        return None
    return HealthWarning(
        "tool_collapse",
        f"{100 * count / total:.0f}% of the last {total} tool calls pick {name!r} (of {len(tools)} tools): the "
        "policy is collapsing onto one action.",
        "Try balanced steps (balance_by, every kind of task in each step) and training the groups that failed "
        "throughout (failed_group_reward, e.g. 0.0 for 0/1 rewards: the questions the one tool gets wrong then "
        "push it down), or a lower learning rate; a KL penalty (kl_coef) also holds the policy near the model it "
        "started from.",
    )


def entropy_collapse(records: Sequence[Record]) -> Optional[HealthWarning]:
    """The mean entropy of the last `ENTROPY_WINDOW` steps fell below `ENTROPY_DROP_FRACTION` of the first ones'."""
    values = _values(records, "entropy")
    if len(values) < 2 * ENTROPY_WINDOW:
        return None
    first = statistics.fmean(values[:ENTROPY_WINDOW])
    last = statistics.fmean(values[-ENTROPY_WINDOW:])
    if first <= 0 or last >= ENTROPY_DROP_FRACTION * first:
        return None
    return HealthWarning(
        "entropy_collapse",
        f"The entropy of the sampled tokens fell from {first:.3f} to {last:.3f}: the policy answers ever more the "
        "same way, so groups stop differing and exploration stops.",
        "Lower the learning rate, add a KL penalty (kl_coef), or raise the temperature.",
    )


def truncation(records: Sequence[Record]) -> Optional[HealthWarning]:
    """At least `TRUNCATION_WARN_RATE` of the last step's calls stopped at the token limit (not when the run keeps
    truncated calls on purpose, `truncated="keep"`: its length limit is part of the task)."""
    rate = records[-1].get("truncation_rate") if records else None
    if records and records[-1].get("truncation_kept"):
        return None
    if not isinstance(rate, (int, float)) or rate < TRUNCATION_WARN_RATE:
        return None
    return HealthWarning(
        "truncation",
        f"{100 * rate:.0f}% of the last step's LLM calls were cut off by the token limit: truncated answers are "
        "scored (and trained on) unfinished.",
        "Raise max_tokens in the agent's sampling parameters (and max_response_tokens), or ask for shorter answers.",
    )


def sampler_gap(records: Sequence[Record]) -> Optional[HealthWarning]:
    """The sampler's and the trainer's log-probabilities of the last step differ by `SAMPLER_GAP_WARN` on average."""
    gap = records[-1].get("sampler_gap_mean") if records else None
    if not isinstance(gap, (int, float)) or gap < SAMPLER_GAP_WARN:
        return None
    return HealthWarning(
        "sampler_gap",
        f"The sampler and the trainer disagree: the log-probabilities of the sampled tokens differ by {gap:.3f} "
        "per token on average, so the update is computed for a distribution other than the one sampled.",
        "Check that the server samples at the training temperature without top_p/top_k, serves the newest weights, "
        "and runs the same precision as training (docs/vllm.md).",
    )


def drift(records: Sequence[Record]) -> Optional[HealthWarning]:
    """At least `DRIFT_WARN_RATE` of the last step's continuing calls did not extend their conversation's ids."""
    rate = records[-1].get("drift_rate") if records else None
    if not isinstance(rate, (int, float)) or rate < DRIFT_WARN_RATE:
        return None
    return HealthWarning(
        "drift",
        f"{100 * rate:.0f}% of the last step's continuing calls did not extend their conversation's token ids: "
        "they are trained one call at a time.",
        "Check the chat template (one that re-renders the history) and that the server returns token ids "
        "(docs/algorithms.md, 'Multi-turn samples').",
    )


def invalid_tool_calls(records: Sequence[Record]) -> Optional[HealthWarning]:
    """At least `INVALID_TOOL_CALLS_WARN` of the last step's tool calls name no offered tool or carry arguments that
    are not a JSON object."""
    stats = records[-1].get("tool_calls") if records else None
    if not stats or (stats.get("calls") or 0) < _MIN_INVALID_TOOL_CALLS or stats.get("validity") is None:
        return None
    if 1 - stats["validity"] < INVALID_TOOL_CALLS_WARN:
        return None
    return HealthWarning(
        "invalid_tool_calls",
        f"{100 * (1 - stats['validity']):.0f}% of the last step's {stats['calls']} tool calls do not parse (an "
        "unknown tool, or arguments that are not a JSON object).",
        "Check the server's tool-call parser for this model's chat template; reward only valid calls so the model "
        "learns the format; a larger model makes fewer format errors.",
    )


def stratum_gap(records: Sequence[Record]) -> Optional[HealthWarning]:
    """Over the last `STRATUM_WINDOW` steps, the best stratum's mean reward exceeds the worst's by
    `STRATUM_GAP_WARN`: one kind of task is neglected."""
    pooled: dict[str, list[float]] = {}
    for record in records[-STRATUM_WINDOW:]:
        for key, value in (record.get("reward_by_stratum") or {}).items():
            pooled.setdefault(key, []).append(float(value))
    if len(pooled) < 2:
        return None
    means = {key: statistics.fmean(values) for key, values in pooled.items()}
    best, worst = max(means, key=means.__getitem__), min(means, key=means.__getitem__)
    if means[best] - means[worst] < STRATUM_GAP_WARN:
        return None
    return HealthWarning(
        "stratum_gap",
        f"Tasks of kind {worst!r} score {means[worst]:.2f} while {best!r} scores {means[best]:.2f}: the policy "
        "serves one kind of task and neglects another.",
        "Use balanced steps (balance_by) so every kind is in each step, or a lower learning rate.",
    )


RULES: tuple[Callable[[Sequence[Record]], Optional[HealthWarning]], ...] = (
    no_signal,
    tool_collapse,
    entropy_collapse,
    truncation,
    sampler_gap,
    drift,
    invalid_tool_calls,
    stratum_gap,
)
"""Every rule, most telling first (the verdict's order for ties)."""


def health_warnings(records: Sequence[Record]) -> list[HealthWarning]:
    """The warnings whose pattern holds at the last of `records` (each stamped with that record's step)."""
    if not records:
        return []
    step = records[-1].get("step")
    found = (rule(records) for rule in RULES)
    return [HealthWarning(w.code, w.message, w.fix, step) for w in found if w is not None]
