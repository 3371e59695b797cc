"""benchmarks/example_agents.py turns the node and compacting examples' summary.json into figures."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import example_agents  # noqa: E402  # pyright: ignore[reportMissingImports]
import run_all  # noqa: E402  # pyright: ignore[reportMissingImports]


def _summary(**extra: Any) -> dict[str, Any]:
    return {
        "steps": 7,
        "held_out_accuracy": {"before": 0.25, "after": 0.6},
        "calls_per_rollout": {"first_step": 2.0, "last_5_steps": 2.0},
        "drift": {"rate": 0.0, "drifted": 0, "per_rollout": {}},
        "lineages": {"lineages_per_rollout": 3.0, "calls_fitting_no_lineage": 0, "trained_share": 0.97},
        "history": [{"step": i + 1, "reward_mean": r} for i, r in enumerate([0.5, 0.8, None, 0.9, 1.0, 1.0, 0.9])],
        **extra,
    }


def test_the_node_agents_gain_is_after_minus_before_and_no_drift_is_met() -> None:
    gain, drift, _ = example_agents.node_figures(_summary(), 10, 0)
    assert math.isclose(gain.value, 0.35)
    assert gain.detail["steps"] == 7
    assert drift.value == 0.0 and drift.met is True


def test_a_node_run_whose_calls_drifted_is_not_met() -> None:
    _, drift, _ = example_agents.node_figures(_summary(drift={"rate": 0.25}), 10, 0)
    assert drift.value == 0.25 and drift.met is False


def test_a_run_without_an_evaluation_reports_no_gain_rather_than_zero() -> None:
    gain, _, _ = example_agents.node_figures(_summary(held_out_accuracy={"before": None, "after": 0.5}), 10, 0)
    assert math.isnan(gain.value)


def test_the_compacting_figures_report_the_trained_share_and_calls_that_fitted_no_lineage() -> None:
    share, unfitted, gain, _ = example_agents.compacting_figures(_summary(), 5, 1)
    assert share.value == 0.97 and share.met is None
    assert unfitted.value == 0 and unfitted.met is True and unfitted.higher_is_better is False
    assert math.isclose(gain.value, 0.35) and gain.detail["seed"] == 1


def test_a_run_that_trained_nothing_has_no_trained_share_rather_than_zero() -> None:
    lineages = {"lineages_per_rollout": 3.0, "calls_fitting_no_lineage": 0, "trained_share": None}
    share, *_ = example_agents.compacting_figures(_summary(lineages=lineages), 5, 0)
    assert math.isnan(share.value) and "none trained" in share.label


def test_calls_fitting_no_lineage_miss_the_target() -> None:
    lineages = {"lineages_per_rollout": 2.5, "calls_fitting_no_lineage": 3, "trained_share": 0.8}
    _, unfitted, _, _ = example_agents.compacting_figures(_summary(lineages=lineages), 5, 0)
    assert unfitted.value == 3 and unfitted.met is False


def test_the_training_reward_is_the_mean_of_the_last_five_steps_with_the_first_as_detail() -> None:
    *_, reward = example_agents.node_figures(_summary(), 10, 0)
    assert reward.key == "examples.node_agent.training_reward"
    assert math.isclose(reward.value, (0.8 + 0.9 + 1.0 + 1.0 + 0.9) / 5)
    assert reward.detail["first_step"] == 0.5 and len(reward.detail["per_step"]) == 6


def test_both_examples_are_registered_full_mode_only_with_their_keys() -> None:
    entries = {b.name: b for b in run_all.REGISTRY if b.script == "example_agents.py"}
    assert set(entries) == {"node_agent", "compacting_agent"}
    assert all(entry.quick is None for entry in entries.values())
    assert entries["node_agent"].full[:2] == ["--example", "node"]
    assert entries["compacting_agent"].full[:2] == ["--example", "compacting"]


def test_the_compacting_gain_names_held_out_rollouts_that_did_not_finish() -> None:
    timed_out = _summary(held_out_unfinished={"before": 8, "after": 0})
    _, _, gain, _ = example_agents.compacting_figures(timed_out, 5, 0)
    assert "8 unfinished before, counted wrong" in gain.label
    assert gain.detail["unfinished"] == {"before": 8, "after": 0}
    _, _, clean, _ = example_agents.compacting_figures(_summary(held_out_unfinished={"before": 0, "after": 0}), 5, 0)
    assert "unfinished" not in clean.label
