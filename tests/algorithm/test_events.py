"""What a progress display makes of an algorithm's events (`AlgorithmProgress`): the rows of a panel and the log
lines, for GRPO's events ("resumed", "rollouts", "step", "evaluation", "checkpoint")."""

from __future__ import annotations

from typing import Any

from agentlightning.algorithm.events import AlgorithmProgress, describe_health, sparkline


def step(number: int, continuations: int = 0, drifted: int = 0, **extra: Any) -> dict[str, Any]:
    """A "step" event's payload, as GRPO emits it (the parts the display reads)."""
    rate = drifted / continuations if continuations else 0.0
    return {
        "step": number,
        "reward_mean": 0.5,
        "samples": 8,
        "tasks": 3,
        "informative_groups": 2,
        "calls_per_rollout": 2.5,
        "drift": {"continuations": continuations, "drifted": drifted, "rate": rate},
        "seconds": {"rollout": 3.0, "update": 1.25, "total": 4.5},
        **extra,
    }


HEALTH = {
    "informative_share": 0.5,
    "entropy": 1.234,
    "tool_calls": {"validity": 0.75, "top_tool": "add", "top_share": 0.92},
    "truncation_rate": 0.4,
    "drift_rate": None,
    "reward_by_stratum": {"product": 0.0, "sum": 1.0},
}
COLLAPSE = {"code": "tool_collapse", "message": "92% of calls pick 'add'.", "fix": "Try balanced steps.", "since": 2}


def _fed(*events: tuple[str, dict[str, Any]], minutes: float | None = None) -> AlgorithmProgress:
    progress = AlgorithmProgress(minutes=minutes)
    for kind, payload in events:
        progress.update(kind, payload)
    return progress


def test_no_rows_before_the_algorithm_says_anything() -> None:
    assert AlgorithmProgress().rows() == []


def test_a_step_shows_its_number_reward_curve_and_seconds_by_part() -> None:
    rows = dict(_fed(("step", step(1)), ("step", {**step(2), "reward_mean": 1.0})).rows())
    assert rows["step"].startswith("2  (")
    assert rows["step reward"] == "1.000 (last 5: 0.750)"
    assert rows["curve"] == "▅█"
    assert rows["last step"] == "rollout 3.0s, update 1.2s, total 4.5s"


def test_the_time_budget_shows_beside_the_step_when_known() -> None:
    assert dict(_fed(("step", step(1)), minutes=15).rows())["step"].endswith(" of 15 min)")
    assert dict(_fed(("step", step(1))).rows())["step"].endswith(" min)")


def test_rewards_outside_zero_to_one_stretch_the_curve() -> None:
    assert sparkline([-1.0, 0.0, 1.0], low=-1.0, high=1.0) == "▁▅█"
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"


def test_the_rollouts_of_the_running_step_show_and_a_repeated_count_changes_nothing() -> None:
    progress = AlgorithmProgress()
    assert progress.update("rollouts", {"step": 1, "mode": "train", "done": 3, "total": 8})
    assert not progress.update("rollouts", {"step": 1, "mode": "train", "done": 3, "total": 8})
    assert dict(progress.rows())["step rollouts"] == "3/8 of the running step"
    progress.update("rollouts", {"step": 1, "mode": "val", "done": 1, "total": 50})
    assert dict(progress.rows())["step rollouts"] == "1/50 of the running evaluation"


def test_evaluations_show_by_label_and_notes_keep_the_last_checkpoint() -> None:
    progress = _fed(
        ("resumed", {"step": 4, "path": "/runs/a/checkpoint-4"}),
        ("evaluation", {"label": "before", "step": 0, "mean_reward": 0.25, "n": 4}),
        ("checkpoint", {"step": 5, "path": "x", "final": False}),
        ("checkpoint", {"step": 6, "path": "y", "final": True}),
    )
    rows = progress.rows()
    assert ("eval before", "0.250") in rows
    notes = [text for label, text in rows if label == ""]
    assert notes == ["resumed from /runs/a/checkpoint-4 (step 4)", "checkpoint: step 6"]
    assert progress.step == 4


def test_the_panel_shows_the_health_and_only_the_warnings_still_active() -> None:
    progress = _fed(("step", step(2, health=HEALTH, warnings=[COLLAPSE])))
    rows = progress.rows()
    assert dict(rows)["health"].startswith("informative groups 50%, entropy 1.234")
    assert ("[bold yellow]warning[/]", "92% of calls pick 'add'. [dim]Try balanced steps.[/]") in rows
    progress.update("step", step(3, health=HEALTH, warnings=[]))
    assert not any("92% of calls" in text for _, text in progress.rows())


def test_a_step_line_says_calls_groups_drift_of_the_step_and_of_the_run() -> None:
    progress = AlgorithmProgress()
    lines = []
    for event in (step(1, continuations=10, drifted=0), step(2, continuations=10, drifted=5)):
        progress.update("step", event)
        lines += progress.lines("step", event)
    assert lines[0] == (
        "step 1: reward 0.500, 8 samples, 2.5 calls/rollout, 2 informative groups of 3 tasks, drift 0% (run 0%), "
        "rollout 3.0s, update 1.2s, total 4.5s"
    )
    assert "drift 50% (run 25%)" in lines[1]


def test_step_lines_add_the_health_and_a_warning_only_at_the_step_it_starts() -> None:
    progress = AlgorithmProgress()
    lines = []
    for number in (2, 3):
        event = step(number, health=HEALTH, warnings=[COLLAPSE])
        progress.update("step", event)
        lines += progress.lines("step", event)
    assert lines.count("  warning: 92% of calls pick 'add'. Try balanced steps.") == 1
    assert lines[1] == (
        "  health: informative groups 50%, entropy 1.234, tool calls valid 75%, top add 92%, truncated 40%, "
        "reward product 0.00, sum 1.00"
    )
    assert describe_health(HEALTH) in lines[1]


def test_an_evaluation_is_one_line_and_rollout_counts_none() -> None:
    progress = AlgorithmProgress()
    evaluation = {"label": "after", "step": 3, "mean_reward": 0.625, "n": 8, "items": []}
    progress.update("evaluation", evaluation)
    assert progress.lines("evaluation", evaluation) == ["evaluation after at step 3: mean reward 0.625 over 8 tasks"]
    progress.update("rollouts", {"done": 1, "total": 2})
    assert progress.lines("rollouts", {"done": 1, "total": 2}) == []
