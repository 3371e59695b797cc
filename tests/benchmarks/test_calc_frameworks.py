"""The calculator benchmark over seeds: each (framework, seed) is its own resumable run, recorded with its commit,
CPU and load; a framework's gain is the mean over its seeds, met only when no seed falls below the floor, and a
model that sends most of its tool calls to one tool misses the top-tool-share target. No training runs here: the
launch of train.py is replaced by one that writes a fabricated summary.json."""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import calc_table  # noqa: E402  # pyright: ignore[reportMissingImports]
import run_all  # noqa: E402  # pyright: ignore[reportMissingImports]

calc = importlib.import_module("calc_frameworks")


def held_out(strict: float, top_tool_share: Optional[float] = 0.5, calls: float = 2.0) -> dict[str, Any]:
    by_name = (
        None
        if top_tool_share is None
        else {"add": round(40 * top_tool_share), "multiply": 40 - round(40 * top_tool_share)}
    )
    return {
        "strict": strict, "lenient": strict, "calls_per_rollout": calls, "valid_tool_call": 1.0, "right_plan": strict,
        "failed": 0.0, "strict_by_op": {"add": strict, "multiply": strict}, "tool_calls_by_name": by_name,
        "top_tool_share": top_tool_share,
    }  # fmt: skip


def summary(
    framework: str, seed: int, gain: float, top_tool_share: Optional[float] = 0.5, drift: float = 0.0
) -> dict[str, Any]:
    return {
        "framework": framework, "settings": {"seed": seed, "max_minutes": 15.0}, "steps": 18,
        "history": [{"samples": 16}] * 18,
        "held_out": {"before": held_out(0.3, 0.9, calls=1.5), "after": held_out(round(0.3 + gain, 3), top_tool_share),
                     "without_tools_before": {"strict": 0.0, "n": 50}},
        "drift": {"rate": drift, "continuations": 300}, "training_tokens": {"transition_over_trained": 1.9},
        "mean_seconds_per_step": {"total": 50.0}, "load_average": [1.0, 1.0, 1.0],
    }  # fmt: skip


class FakeLaunch:
    """Stands in for train.py: records each launch and writes the summary.json a run with that seed would."""

    def __init__(self, gains: Optional[dict[int, float]] = None) -> None:
        self.launched: list[tuple[str, int, float, list[str]]] = []
        self.gains = gains or {}

    def __call__(self, framework: str, seed: int, minutes: float, extra: list[str], run_dir: Path) -> None:
        self.launched.append((framework, seed, minutes, list(extra)))
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps(summary(framework, seed, self.gains.get(seed, 0.4))))


@pytest.fixture
def launch(monkeypatch: pytest.MonkeyPatch) -> FakeLaunch:
    fake = FakeLaunch()
    monkeypatch.setattr(calc, "launch", fake)
    monkeypatch.setattr(calc, "package_tree", lambda: "0123456789")
    return fake


def finished(runs: Path, framework: str, seed: int, minutes: float = 15.0, extra: tuple[str, ...] = ()) -> Path:
    """A run directory as an earlier benchmark run left it: summary.json and the benchmark's record."""
    run_dir = calc.run_dir_of(framework, seed, runs)
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps(summary(framework, seed, 0.5)))
    record = {
        "settings": calc.settings_of(framework, seed, minutes, list(extra)), "commit": "abc1234",
        "package_tree": "9a6c57b936", "cpu": "AMD EPYC", "cpus": 2, "started": "2026-11-27T10:00:00+00:00",
        "finished": "2026-11-27T10:20:00+00:00", "load_before": 0.4, "load_after": 1.9,
    }  # fmt: skip
    (run_dir / calc.RUN_RECORD).write_text(json.dumps(record))
    return run_dir


def test_a_finished_seed_with_the_same_settings_is_read_and_a_missing_seed_is_run(
    tmp_path: Path, launch: FakeLaunch, capsys: pytest.CaptureFixture[str]
) -> None:
    finished(tmp_path, "openai", 0)
    rows = calc.run_entries(["openai"], [0, 1], 15.0, [], tmp_path)
    assert launch.launched == [("openai", 1, 15.0, [])]
    assert [(r["seed"], r["reused"]) for r in rows] == [(0, True), (1, False)]
    assert rows[0]["commit"] == "abc1234" and rows[0]["load"] == (0.4, 1.9)  # what the earlier run recorded
    out = capsys.readouterr().out
    assert "reused" in out and "bench-calc-openai-seed0" in out
    assert "commit abc1234, finished 2026-11-27T10:20:00+00:00, CPU AMD EPYC, load 0.4 -> 1.9" in out


@pytest.mark.parametrize(
    "earlier",
    [{"minutes": 5.0}, {"extra": ("--balance-by-op",)}],
    ids=["other minutes", "other train.py options"],
)
def test_a_finished_seed_made_with_other_settings_is_run_again(
    tmp_path: Path, launch: FakeLaunch, earlier: dict[str, Any]
) -> None:
    finished(tmp_path, "openai", 0, **earlier)
    (row,) = calc.run_entries(["openai"], [0], 15.0, [], tmp_path)
    assert launch.launched == [("openai", 0, 15.0, [])] and row["reused"] is False
    record = json.loads((calc.run_dir_of("openai", 0, tmp_path) / calc.RUN_RECORD).read_text())
    assert record["settings"] == calc.settings_of("openai", 0, 15.0, [])


def test_a_run_directory_without_the_benchmarks_record_is_run_again(tmp_path: Path, launch: FakeLaunch) -> None:
    run_dir = finished(tmp_path, "openai", 0)
    (run_dir / calc.RUN_RECORD).unlink()  # train.py wrote its summary, but the run never reached the end
    calc.run_entries(["openai"], [0], 15.0, [], tmp_path)
    assert launch.launched == [("openai", 0, 15.0, [])]


def test_a_failed_launch_leaves_no_record_that_would_vouch_for_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = finished(tmp_path, "openai", 0, minutes=5.0)

    def fail(*args: Any) -> None:
        raise RuntimeError("train.py failed")

    monkeypatch.setattr(calc, "launch", fail)
    with pytest.raises(RuntimeError):
        calc.run("openai", 0, 15.0, [], tmp_path)
    assert not (run_dir / calc.RUN_RECORD).exists()


def test_each_run_records_its_settings_commit_package_tree_cpu_and_load(tmp_path: Path, launch: FakeLaunch) -> None:
    calc.run_entries(["langgraph"], [2], 15.0, ["--balance-by-op"], tmp_path)
    record = json.loads((calc.run_dir_of("langgraph", 2, tmp_path) / calc.RUN_RECORD).read_text())
    assert record["settings"] == {
        "framework": "langgraph",
        "seed": 2,
        "minutes": 15.0,
        "train_options": ["--balance-by-op"],
    }
    assert record["package_tree"] == "0123456789" and record["commit"]
    assert record["cpu"] == calc.machine_facts()["cpu"]
    assert isinstance(record["load_before"], float) and isinstance(record["load_after"], float)
    assert record["started"] <= record["finished"]
    assert launch.launched == [("langgraph", 2, 15.0, ["--balance-by-op"])]


def test_seed_is_one_seed_seeds_are_several_and_train_options_follow_the_double_dash() -> None:
    assert calc.parse_args([]).seeds == [0]
    assert calc.parse_args(["--seed", "3"]).seeds == [3]
    args = calc.parse_args(["--seeds", "0", "1", "2", "--", "--balance-by-op"])
    assert args.seeds == [0, 1, 2] and args.extra == ["--balance-by-op"]
    with pytest.raises(SystemExit):
        calc.parse_args(["--seed", "0", "--seeds", "1"])
    with pytest.raises(SystemExit):
        calc.parse_args(["--seeds", "1", "1"])


def figures_of(folder: Path, gains: list[float], shares: Optional[list[Optional[float]]] = None) -> dict[str, Any]:
    """The figures of openai runs with these gains (and top-tool shares after training), seed i drifting 0.01 * i."""
    rows = []
    for seed, gain in enumerate(gains):
        run_dir = calc.run_dir_of("openai", seed, folder)
        run_dir.mkdir(parents=True)
        share = 0.5 if shares is None else shares[seed]
        data = summary("openai", seed, gain, top_tool_share=share, drift=0.01 * seed)
        (run_dir / "summary.json").write_text(json.dumps(data))
        record = {"settings": calc.settings_of("openai", seed, 15.0, []), "commit": f"c{seed}", "cpu": "AMD EPYC",
                  "load_before": 0.5, "load_after": 1.5}  # fmt: skip
        rows.append(calc.row(run_dir, record))
    return {figure.key: figure for figure in calc.framework_figures(rows)}


def test_the_gain_is_the_mean_over_the_seeds_with_each_seed_its_lowest_and_spread(tmp_path: Path) -> None:
    gain = figures_of(tmp_path, [0.4, 0.3, 0.5])["calc.openai.strict_gain"]
    assert gain.value == pytest.approx(0.4) and gain.rounds == [0.4, 0.3, 0.5]
    assert (gain.detail["min"], gain.detail["n_seeds"], gain.detail["seeds"]) == (0.3, 3, [0, 1, 2])
    assert gain.detail["std"] == pytest.approx(0.082, abs=1e-3)  # population standard deviation
    assert gain.met is True and gain.target.startswith(">= +0.30 mean over the seeds, no seed below +0.15")
    seeds = gain.detail["per_seed"]
    assert [s["commit"] for s in seeds] == ["c0", "c1", "c2"] and seeds[0]["cpu"] == "AMD EPYC"
    assert seeds[0]["load"] == [0.5, 1.5] and seeds[0]["strict_by_op"] == {"add": 0.7, "multiply": 0.7}
    assert seeds[0]["top_tool_share"] == 0.5


def test_a_mean_above_target_is_not_met_when_one_seed_falls_below_the_floor(tmp_path: Path) -> None:
    gain = figures_of(tmp_path, [0.5, 0.6, 0.1])["calc.openai.strict_gain"]
    assert gain.value == pytest.approx(0.4) and gain.met is False


def test_a_mean_below_target_is_not_met(tmp_path: Path) -> None:
    assert figures_of(tmp_path, [0.2, 0.3, 0.35])["calc.openai.strict_gain"].met is False


def test_the_top_tool_share_is_the_highest_seeds_and_must_stay_below_ninety_percent(tmp_path: Path) -> None:
    share = figures_of(tmp_path, [0.4, 0.4, 0.4], shares=[0.5, 0.925, 0.6])["calc.openai.top_tool_share"]
    assert share.value == 0.925 and share.met is False and share.higher_is_better is False
    assert share.target == "< 0.90" and share.rounds == [0.5, 0.925, 0.6]
    assert figures_of(tmp_path / "one", [0.4], shares=[0.55])["calc.openai.top_tool_share"].met is True


def test_without_tool_calls_counted_there_is_no_top_tool_share_figure(tmp_path: Path) -> None:
    assert "calc.openai.top_tool_share" not in figures_of(tmp_path, [0.4, 0.4], shares=[None, None])


def test_calls_per_rollout_are_the_mean_and_drift_the_worst_seed(tmp_path: Path) -> None:
    figures = figures_of(tmp_path, [0.4, 0.4, 0.4])
    calls, drift = figures["calc.openai.calls_per_rollout"], figures["calc.openai.drift_rate"]
    assert calls.value == 2.0 and "mean of 3 seeds" in calls.label and calls.detail["before"] == 1.5
    assert drift.value == 0.02 and drift.met is False and "worst of 3 seeds" in drift.label


def test_one_seed_gives_the_figures_of_that_run(tmp_path: Path) -> None:
    figures = figures_of(tmp_path, [0.32])
    gain = figures["calc.openai.strict_gain"]
    assert gain.label == "calculator agent, openai: strict held-out gain (0.30 -> 0.62)"
    assert (gain.value, gain.met, gain.detail["steps"], gain.detail["std"]) == (0.32, True, 18, 0.0)
    assert figures["calc.openai.drift_rate"].label == "calculator agent, openai: token drift rate through the proxy"


# ------------------------------------------------------------------------------------------------- the README table
def _record(figures: dict[str, Any]) -> dict[str, Any]:
    return {"date": "2026-11-30T10:00:00+00:00", "commit": "abc1234", "load_before": 0.5, "load_after": 1.5,
            "command": "python benchmarks/calc_frameworks.py --seeds 0 1 2 --minutes 15",
            "figures": [asdict(figure) for figure in figures.values()]}  # fmt: skip


def test_the_table_of_a_result_over_seeds_shows_seeds_spread_lowest_seed_and_top_tool_share(tmp_path: Path) -> None:
    table = calc_table.render_calc_table([_record(figures_of(tmp_path, [0.4, 0.3, 0.5], shares=[0.5, 0.925, 0.6]))])
    header, _, row = table.splitlines()
    assert "seeds" in header and "mean ± std" in header and "lowest seed" in header and "top tool share" in header
    assert row == (
        "| plain OpenAI SDK | 3 | 18/18/18 | +0.40 ± 0.08 (0.30 -> 0.70) | +0.30 "
        "| met (>= +0.30 mean over the seeds, no seed below +0.15, each run 15 minutes) | 1.00 -> 1.00 "
        "| 1.50 -> 2.00 | 0.02 | 0.93 | **not met** (< 0.90) |"
    )


def test_an_old_single_seed_result_renders_as_before() -> None:
    gain = {
        "key": "calc.openai.strict_gain",
        "label": "g",
        "value": 0.16,
        "unit": "strict accuracy",
        "target": ">= +0.30 in 15 minutes",
        "met": False,
        "detail": {"steps": 20, "valid_tool_call": [0.58, 1.0]},
    }
    calls = {
        "key": "calc.openai.calls_per_rollout",
        "label": "c",
        "value": 2.0,
        "unit": "calls",
        "detail": {"before": 1.58},
    }
    drift = {"key": "calc.openai.drift_rate", "label": "d", "value": 0.0, "unit": ""}  # fmt: skip
    table = calc_table.render_calc_table([{"figures": [gain, calls, drift]}])
    assert table.splitlines() == [
        "| framework | steps | held-out strict gain | | valid tool call | LLM calls per rollout | drift |",
        "|---|---:|---|---|---|---|---|",
        "| plain OpenAI SDK | 20 | +0.16 | **not met** (>= +0.30 in 15 minutes) | 0.58 -> 1.00 | 1.58 -> 2.00 | 0 |",
    ]


def test_the_committed_results_render_the_committed_readme() -> None:
    records = [
        json.loads(path.read_text())
        for name in calc_table.BENCHMARKS
        if (path := BENCHMARKS / "results" / f"{name}.json").is_file()
    ]
    assert records, "no calc_<framework>.json result is committed"
    assert calc_table.calc_section(records) in calc_table.README.read_text()


def test_each_framework_is_its_own_benchmark_so_a_later_run_replaces_only_its_figures() -> None:
    entries = {b.name: b for b in run_all.REGISTRY if b.script == "calc_frameworks.py"}
    assert sorted(entries) == sorted(calc_table.BENCHMARKS)
    for name, entry in entries.items():
        framework = name.removeprefix("calc_").replace("_", "-")
        assert entry.full[:2] == ["--frameworks", framework] and entry.keys == (f"calc.{framework}.*",)


def test_the_table_joins_the_frameworks_results_in_the_order_given(tmp_path: Path) -> None:
    openai = _record(figures_of(tmp_path / "o", [0.4]))
    langgraph = json.loads(json.dumps(openai).replace("calc.openai.", "calc.langgraph."))
    rows = calc_table.render_calc_table([langgraph, openai]).splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == ["| LangGraph", "| plain OpenAI SDK"]


def test_the_readme_section_of_a_result_over_seeds_names_each_runs_commit_date_load_and_cpu(tmp_path: Path) -> None:
    record = _record(figures_of(tmp_path, [0.4, 0.3]))
    record["command"] = "python benchmarks/calc_frameworks.py --seeds 0 1 --json /tmp/c.json -- --balance-by-op"
    section = calc_table.calc_section([record])
    assert "`python benchmarks/calc_frameworks.py --seeds 0 1 -- --balance-by-op`" in section
    assert (
        "- plain OpenAI SDK: seed 0: c0, n/a, load 0.5 -> 1.5, AMD EPYC; seed 1: c1, n/a, load 0.5 -> 1.5, AMD EPYC"
        in section
    )
