"""The health warnings of a GRPO run: each rule fires on its failure pattern and stays quiet short of it."""

from __future__ import annotations

from typing import Any

from agentlightning.algorithm.grpo.reporting import health_rules as rules
from agentlightning.algorithm.grpo.reporting.health_rules import health_warnings


def _record(step: int, **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"step": step, "informative_share": 0.5, "reward_mean": 0.5}
    base.update(values)
    return base


def _tools(chosen: dict[str, int], offered: tuple[str, ...] = ("add", "multiply"), validity: float = 1.0) -> Any:
    calls = sum(chosen.values())
    top = max(chosen, key=chosen.__getitem__) if chosen else None
    return {
        "calls": calls,
        "validity": validity,
        "offered": list(offered),
        "chosen": chosen,
        "top_tool": top,
        "top_share": chosen[top] / calls if top else None,
    }


def _codes(records: list[dict[str, Any]]) -> list[str]:
    return [w.code for w in health_warnings(records)]


def test_no_informative_group_for_n_steps_warns_nothing_to_learn() -> None:
    flat = [_record(s, informative_share=0.0, reward_mean=0.0) for s in range(1, rules.NO_SIGNAL_STEPS + 1)]
    (warning,) = health_warnings(flat)
    assert warning.code == "no_signal" and warning.step == rules.NO_SIGNAL_STEPS
    assert "too hard or too easy" in warning.message and "mean reward 0.00" in warning.message
    assert _codes(flat[1:]) == []  # one step short
    assert _codes([*flat[:-1], _record(9, informative_share=0.25)]) == []  # one informative group breaks the run


def test_one_tool_taking_90_percent_of_calls_warns_collapse_with_balanced_steps_as_fix() -> None:
    records = [_record(s, tool_calls=_tools({"add": 9, "multiply": 1})) for s in range(1, 4)]
    (warning,) = health_warnings(records)
    assert warning.code == "tool_collapse" and "'add'" in warning.message and "90%" in warning.message
    assert "balanced steps" in warning.fix and "learning rate" in warning.fix
    assert _codes([_record(1, tool_calls=_tools({"add": 8, "multiply": 2}))] * 3) == []


def test_tool_concentration_is_not_collapse_with_one_tool_offered_or_few_calls() -> None:
    assert _codes([_record(1, tool_calls=_tools({"add": 30}, offered=("add",)))]) == []
    assert _codes([_record(1, tool_calls=_tools({"add": rules.MIN_TOOL_CALLS - 1}))]) == []


def test_entropy_falling_below_a_fraction_of_its_start_warns() -> None:
    falling = [_record(s, entropy=e) for s, e in enumerate([2.0, 2.0, 2.0, 0.5, 0.4, 0.3], start=1)]
    (warning,) = health_warnings(falling)
    assert warning.code == "entropy_collapse" and "2.000 to 0.400" in warning.message
    steady = [_record(s, entropy=e) for s, e in enumerate([2.0, 2.0, 2.0, 1.5, 1.4, 1.3], start=1)]
    assert _codes(steady) == [] and _codes(falling[:5]) == []


def test_truncated_calls_above_the_threshold_warn_to_raise_max_tokens() -> None:
    (warning,) = health_warnings([_record(1, truncation_rate=0.4)])
    assert warning.code == "truncation" and "40%" in warning.message and "max_tokens" in warning.fix
    assert _codes([_record(1, truncation_rate=0.39)]) == [] and _codes([_record(1, truncation_rate=None)]) == []


def test_a_sampler_trainer_gap_warns_that_they_disagree() -> None:
    (warning,) = health_warnings([_record(1, sampler_gap_mean=rules.SAMPLER_GAP_WARN, sampler_gap_max=3.0)])
    assert warning.code == "sampler_gap" and "disagree" in warning.message
    assert _codes([_record(1, sampler_gap_mean=0.01, sampler_gap_max=3.0)]) == []


def test_drift_above_the_threshold_warns_about_the_chat_template() -> None:
    (warning,) = health_warnings([_record(1, drift_rate=0.5)])
    assert warning.code == "drift" and "chat template" in warning.fix
    assert _codes([_record(1, drift_rate=0.1)]) == []


def test_tool_calls_that_do_not_parse_warn() -> None:
    (warning,) = health_warnings([_record(1, tool_calls=_tools({"add": 3, "multiply": 3}, validity=0.5))])
    assert warning.code == "invalid_tool_calls" and "50%" in warning.message
    assert _codes([_record(1, tool_calls=_tools({"add": 3, "multiply": 3}, validity=0.9))]) == []
    assert _codes([_record(1, tool_calls=_tools({"add": 2, "multiply": 2}, validity=0.0))]) == []  # too few


def test_a_stratum_far_behind_another_warns_that_it_is_neglected() -> None:
    records = [_record(s, reward_by_stratum={"sum": 1.0, "product": 0.0}) for s in range(1, 4)]
    (warning,) = health_warnings(records)
    assert warning.code == "stratum_gap" and "'product' score 0.00" in warning.message
    assert "balance_by" in warning.fix
    assert _codes([_record(1, reward_by_stratum={"sum": 0.6, "product": 0.4})]) == []


def test_a_healthy_run_has_no_warning() -> None:
    records = [
        _record(s, entropy=1.0, drift_rate=0.0, truncation_rate=0.0, tool_calls=_tools({"add": 5, "multiply": 5}))
        for s in range(1, 8)
    ]
    assert health_warnings(records) == [] and health_warnings([]) == []


def test_truncation_is_not_warned_about_when_the_run_keeps_truncated_calls_on_purpose() -> None:
    from agentlightning.algorithm.grpo.reporting.health_rules import truncation

    assert truncation([{"truncation_rate": 0.9}]) is not None
    assert truncation([{"truncation_rate": 0.9, "truncation_kept": True}]) is None
