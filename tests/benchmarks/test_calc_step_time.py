"""The side-by-side step-time benchmark of the calculator agent: which steps it times, what it normalises by, and
that both sides of a run are summarised alike (no training runs here: the figures come from fabricated histories)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

step_time = importlib.import_module("calc_step_time")


def entry(step: int, total: float, *, rollouts: int = 16, samples: int = 16, tokens: int = 8000) -> dict[str, Any]:
    seconds = {"rollout": total * 0.6, "adapter": 0.1, "update": total * 0.4 - 0.2, "weight_swap": 0.1, "total": total}
    return {"step": step, "rollouts": rollouts, "samples": samples, "sample_tokens": tokens, "seconds": seconds}


def test_the_first_step_is_left_out_of_the_means() -> None:
    figures = step_time.step_figures({"history": [entry(1, 100.0), entry(2, 40.0), entry(3, 20.0)]})
    assert figures["steps"] == 2
    assert figures["seconds"]["total"] == pytest.approx(30.0)


def test_rollout_and_update_seconds_are_normalised_by_the_steps_contents() -> None:
    history = [entry(1, 9.0), entry(2, 10.0, rollouts=20, tokens=5000), entry(3, 30.0, rollouts=40, tokens=15000)]
    figures = step_time.step_figures({"history": history})
    assert figures["rollout_seconds_per_rollout"] == pytest.approx((6.0 + 18.0) / 60, abs=1e-3)
    assert figures["update_seconds_per_1k_tokens"] == pytest.approx(1000 * (3.8 + 11.8) / 20000, abs=1e-3)
    assert figures["rollouts_per_step"] == 30.0


def test_an_interrupted_step_without_timings_is_not_timed() -> None:
    history = [entry(1, 9.0), entry(2, 10.0), {"step": 3, "interrupted": True, "samples": 4}]
    assert step_time.step_figures({"history": history})["steps"] == 1


def test_a_run_with_no_timed_step_is_an_error_naming_it() -> None:
    with pytest.raises(SystemExit, match="no timed step"):
        step_time.step_figures({"history": [entry(1, 9.0)]})


def test_each_side_is_the_mean_over_its_seeds() -> None:
    runs = [
        {"seed": seed, "figures": step_time.step_figures({"history": [entry(1, 1.0), entry(2, total)]}),
         "load": [1.0, 1.5], "run_dir": f"runs/x{seed}"}
        for seed, total in ((0, 20.0), (1, 40.0))
    ]  # fmt: skip
    summary = step_time.side_summary(runs)
    assert summary["seconds"]["total"] == pytest.approx(30.0)
    assert [seed["seed"] for seed in summary["per_seed"]] == [0, 1]


def test_fewer_than_two_steps_is_refused() -> None:
    with pytest.raises(SystemExit):
        step_time.parse_args(["--steps", "1"])
