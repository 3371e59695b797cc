"""Rollouts whose history is not append-only (a compacted context, a sub-agent): each lineage trained as one
multi-turn sample, the summary's tokens in the loss, and the lineage figures of a step and a run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import DriftCounts, build_samples
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts
from agentlightning.types import Triplet

SYSTEM = [1, 2, 3]
SUMMARY = [60, 61, 62]


def _call(prompt: list[int], response: list[int]) -> Triplet:
    return Triplet(prompt={"token_ids": prompt}, response={"token_ids": response})


def _compacting_rollout(name: str, reward: float) -> RolloutData:
    """A tool turn, the summary call, the conversation resumed from the summary, and a sub-agent's call: three
    lineages, 1 + 3 + 1 + 2 generated tokens."""
    calls = [
        _call([*SYSTEM, 10], [20]),
        _call([*SYSTEM, 10, 20, 30, 90], SUMMARY),  # 30: the tool's result, 90: "summarise"
        _call([*SYSTEM, 70, *SUMMARY], [40]),  # resumed from the summary (a fresh lineage)
        _call([5, 5, 12], [50, 51]),  # the sub-agent's fresh conversation
    ]
    rollout: Any = SimpleNamespace(status="succeeded", rollout_id=name)
    return RolloutData(rollout, reward, calls)


def _build(data: list[RolloutData], **settings: Any) -> Any:
    config = GRPOConfig(group_size=2, tasks_per_step=1, **settings)
    return build_samples(data, [0] * len(data), [7], SkipCounts(), config)


def test_each_lineage_of_a_compacting_rollout_is_one_sample_with_the_summary_in_its_loss() -> None:
    built = _build([_compacting_rollout("a", 1.0), _compacting_rollout("b", 0.0)])
    first = built.samples[:3]
    assert [(s.prompt_ids, s.calls) for s in first] == [
        ([*SYSTEM, 10], 2),
        ([*SYSTEM, 70, *SUMMARY], 1),
        ([5, 5, 12], 1),
    ]
    assert first[0].response_ids == [20, 30, 90, *SUMMARY]
    assert first[0].loss_mask == [1, 0, 0, 1, 1, 1]  # the summary is the model's: trained with the outcome
    assert all(s.advantage == first[0].advantage > 0 for s in first)


def test_a_step_counts_the_lineages_of_its_rollouts() -> None:
    built = _build([_compacting_rollout("a", 1.0), _compacting_rollout("b", 0.0)])
    assert (built.drift.rollouts, built.drift.lineages, built.drift.lineages_per_rollout) == (2, 6, 3.0)
    assert built.drift.drifted == 0


def test_every_generated_token_of_a_trained_rollout_is_trained_when_nothing_is_cut() -> None:
    built = _build([_compacting_rollout("a", 1.0), _compacting_rollout("b", 0.0)])
    assert (built.drift.generated_tokens, built.drift.trained_tokens, built.drift.trained_share) == (14, 14, 1.0)


def test_tokens_cut_at_max_response_tokens_lower_the_trained_share() -> None:
    built = _build([_compacting_rollout("a", 1.0), _compacting_rollout("b", 0.0)], max_response_tokens=2)
    # the summary (3 tokens) is cut to 2 in each rollout
    assert (built.drift.generated_tokens, built.drift.trained_tokens) == (14, 12)
    assert built.drift.trained_share == 12 / 14


def test_rollouts_of_groups_without_signal_count_lineages_but_no_generated_tokens() -> None:
    built = _build([_compacting_rollout("a", 1.0), _compacting_rollout("b", 1.0)])
    assert built.samples == []
    assert (built.drift.lineages, built.drift.generated_tokens, built.drift.trained_share) == (6, 0, None)


def test_the_run_summary_reports_lineages_per_rollout_calls_fitting_none_and_the_trained_share() -> None:
    run = DriftCounts()
    run.add(_build([_compacting_rollout("a", 1.0), _compacting_rollout("b", 0.0)]).drift)
    run.add(DriftCounts(rollouts=2, calls=4, continuations=2, drifted=1, rollouts_drifted=1, lineages=3))
    assert run.lineage_summary() == {
        "lineages_per_rollout": 2.25,
        "calls_fitting_no_lineage": 1,
        "generated_tokens": 14,
        "trained_tokens": 14,
        "trained_share": 1.0,
    }


def test_counts_saved_before_lineages_were_counted_load_with_zero_lineages() -> None:
    saved = {"rollouts": 3, "calls": 6, "continuations": 3, "drifted": 1, "rollouts_drifted": 1, "rate": 0.3333}
    loaded = DriftCounts.from_dict(saved)
    assert (loaded.rollouts, loaded.drifted, loaded.lineages, loaded.generated_tokens) == (3, 1, 0, 0)
    assert DriftCounts.from_dict(loaded.to_dict()) == loaded
