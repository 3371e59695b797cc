"""The multi-agent benchmark's reviewer is judged against the 0.5 a constant verdict scores, not its gain alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import multi_agent_adapters  # noqa: E402  # pyright: ignore[reportMissingImports]

ALWAYS_YES = {"before": {"all": 0.18}, "after": {"right": 1.0, "wrong": 0.0, "all": 0.5}}
REVIEWING = {"before": {"all": 0.18}, "after": {"right": 0.9, "wrong": 0.5, "all": 0.7}}


def test_a_reviewer_that_says_yes_to_everything_misses_whatever_its_gain() -> None:
    assert multi_agent_adapters.met("reviewer", 0.32, ALWAYS_YES) is False


def test_a_reviewer_above_the_base_rate_with_the_gain_meets_the_target() -> None:
    assert multi_agent_adapters.met("reviewer", 0.52, REVIEWING) is True


def test_the_solver_needs_only_its_gain() -> None:
    assert multi_agent_adapters.met("solver", 0.6, None) is True
    assert multi_agent_adapters.met("solver", 0.1, None) is False
    assert multi_agent_adapters.met("solver", None, None) is False


def test_rejudging_an_earlier_result_keeps_its_figures_and_provenance_and_records_the_rule(tmp_path: Path) -> None:
    figure = {"key": "grpo.multi_agent.reviewer_gain", "value": 0.32, "met": True, "target": ">= +0.2",
              "detail": {"reviewer_accuracy": ALWAYS_YES}}  # fmt: skip
    solver = {"key": "grpo.multi_agent.solver_gain", "value": 0.62, "met": True, "target": ">= +0.2",
              "detail": {"reviewer_accuracy": ALWAYS_YES}}  # fmt: skip
    path = tmp_path / "multi_agent_adapters.json"
    path.write_text(json.dumps({"commit": "abc1234", "date": "2026-11-28T14:47:00+00:00", "load_before": 0.1,
                                "figures": [solver, figure]}))  # fmt: skip
    multi_agent_adapters.main(["--rejudge", str(path)])
    record = json.loads(path.read_text())
    assert (record["commit"], record["load_before"]) == ("abc1234", 0.1)
    assert [f["met"] for f in record["figures"]] == [True, False]
    assert [f["value"] for f in record["figures"]] == [0.62, 0.32]
    assert "0.5" in record["rejudged"]["rule"] and record["figures"][1]["target"].startswith(">= +0.2 and")
