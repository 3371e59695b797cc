"""The summary table of docs/benchmarks.md is generated from benchmarks/results/, and run_all.py survives failures.

The first test is the guard: the table in the document must be exactly what `benchmarks/summary_table.py` writes
from the committed result files, so the document cannot hold a figure that no benchmark run wrote.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import overview  # noqa: E402  # pyright: ignore[reportMissingImports]
import run_all  # noqa: E402  # pyright: ignore[reportMissingImports]
import summary_table  # noqa: E402  # pyright: ignore[reportMissingImports]


def record(
    date: str, figures: list[dict[str, Any]], commit: str = "abc1234", load: tuple[float, float] = (0.5, 1.5)
) -> dict[str, Any]:
    return {"date": date, "commit": commit, "load_before": load[0], "load_after": load[1], "figures": figures}


def figure(key: str, value: float, **fields: Any) -> dict[str, Any]:
    return {"key": key, "label": fields.pop("label", key), "value": value, "unit": fields.pop("unit", "ops/s")} | fields


def test_the_overview_and_the_full_table_are_what_the_results_generate() -> None:
    for page, current, regenerated in summary_table.regenerate():
        assert current == regenerated, f"{page.name} differs from the results: run python benchmarks/summary_table.py"


def test_every_registered_benchmark_has_a_question_in_the_overview() -> None:
    assert {benchmark.name for benchmark in run_all.REGISTRY} <= set(overview.QUESTIONS)


def test_a_figure_within_five_percent_of_its_peer_is_a_tie_whatever_its_target() -> None:
    peer = {"name": "uvicorn", "value": 304.0}
    ahead = figure("a", 308.0, target="ours better", met=True, peer=peer, ratio=1.01)
    behind = figure("b", 9.9, target="<= TRL", met=False, peer=peer, ratio=0.99)
    clear = figure("c", 400.0, target="ours better", met=True, peer=peer, ratio=1.32)
    assert [summary_table.verdict(f) for f in (ahead, behind, clear)] == ["tie", "tie", "met"]


def test_the_overview_shows_the_headline_figures_with_their_peer_and_the_command_to_re_measure() -> None:
    figures = [
        figure("store.http.libraries.client.rollouts_per_s", 308.0, label="client", target="ours better", met=True,
               peer={"name": "aiohttp", "value": 195.0}, ratio=1.58),
        figure("store.http.libraries.client.cpu_ms_per_rollout", 5.1, label="cpu"),
    ]  # fmt: skip
    table = overview.render_overview({"store_http_libraries": record("2026-11-27T19:00:00+00:00", figures)})
    rows = table.splitlines()[2:]
    assert len(rows) == 1, "only the headline figure"
    for text in ("beat the libraries a user would pick", "client: **308 ops/s**", "aiohttp: 195 (ours 1.58x)", "met (ours better)",
                 "2026-11-27", "`run_all.py --only store_http_libraries`"):  # fmt: skip
        assert text in rows[0]


def test_without_headline_patterns_the_overview_picks_a_figure_with_a_peer_then_one_with_a_target() -> None:
    plain, targeted = figure("x.plain", 1.0), figure("x.target", 2.0, target="> 1", met=True)
    peered = figure("x.peer", 3.0, peer={"name": "p", "value": 1.0}, ratio=3.0)
    assert overview.headline_figures("unlisted", record("2026-11-27", [plain, targeted, peered])) == [peered]
    assert overview.headline_figures("unlisted", record("2026-11-27", [plain, targeted])) == [targeted]
    assert overview.headline_figures("unlisted", record("2026-11-27", [plain])) == [plain]


def test_every_committed_result_names_a_registered_benchmark() -> None:
    names = {benchmark.name for benchmark in run_all.REGISTRY}
    assert set(summary_table.load_results(summary_table.RESULTS_DIR)) <= names


def test_a_row_shows_figure_target_verdict_peer_and_provenance() -> None:
    peer_figure = figure(
        "store.x", 384.0, unit="rollouts/s", target=">= 250 rollouts/s", met=True,
        peer={"name": "aiohttp", "value": 243.0}, ratio=384 / 243,
    )  # fmt: skip
    table = summary_table.render_table({"bench": record("2026-11-26T07:00:00+00:00", [peer_figure], load=(0.4, 7.8))})
    row = table.splitlines()[2]
    for text in ("384 rollouts/s", ">= 250 rollouts/s", "| met |", "aiohttp: 243 (ours 1.58x)", "`bench`",
                 "abc1234", "2026-11-26 07:00", "0.4 -> 7.8"):  # fmt: skip
        assert text in row


def test_a_missed_target_is_marked_not_met_and_a_figure_without_target_has_no_verdict() -> None:
    figures = [figure("a", 10.5, target="< 5 ms", met=False), figure("b", 3.0)]
    rows = summary_table.render_table({"bench": record("2026-11-26T07:00:00+00:00", figures)}).splitlines()[2:]
    missed, plain = ([cell.strip() for cell in row.split("|")[1:-1]] for row in rows)
    assert missed[1:4] == ["10.5 ops/s", "< 5 ms", "**not met**"]
    assert plain[1:4] == ["3 ops/s", "", ""]


def test_rows_from_different_runs_carry_their_own_commit_date_and_load() -> None:
    records = {
        "one": record("2026-11-26T07:00:00+00:00", [figure("a", 1.0)], commit="1111111", load=(0.3, 0.9)),
        "two": record("2026-11-27T08:30:00+00:00", [figure("b", 2.0)], commit="2222222", load=(5.0, 9.0)),
    }
    rows = summary_table.render_table(records, order=["two", "one"]).splitlines()[2:]
    assert "2222222" in rows[0] and "2026-11-27 08:30" in rows[0] and "5.0 -> 9.0" in rows[0]
    assert "1111111" in rows[1] and "2026-11-26 07:00" in rows[1] and "0.3 -> 0.9" in rows[1]


def test_a_row_names_the_cpu_it_ran_on_and_whether_it_has_native_bfloat16() -> None:
    machines = {
        "xeon": {"cpu": "Intel(R) Xeon(R) Processor", "native_bf16": True},
        "epyc": {"cpu": "AMD EPYC", "native_bf16": False},
        "old": {},
    }
    records = {
        name: record("2026-11-26T07:00:00+00:00", [figure(name, 1.0)]) | {"machine": m} for name, m in machines.items()
    }
    rows = summary_table.render_table(records, order=["xeon", "epyc", "old"]).splitlines()[2:]
    assert [row.split("|")[-2].strip() for row in rows] == [
        "Intel Xeon, native bf16",
        "AMD EPYC, no native bf16",
        "n/a",
    ]


def test_the_package_code_line_groups_benchmarks_by_the_tree_their_run_imported() -> None:
    same_code = {
        f"b{i}": record("2026-11-26T07:00:00+00:00", [figure("k", 1.0)], commit=commit) | {"package_tree": "aaaa"}
        for i, commit in enumerate(["1111111", "2222222", "2222222", "1111111", "1111111", "2222222"])
    }
    older = record("2026-11-25T07:00:00+00:00", [figure("s", 1.0)], commit="0000000") | {"package_tree": "bbbb"}
    edited = record("2026-11-25T07:00:00+00:00", [figure("t", 1.0)], commit="3333333+dirty")
    line = summary_table.package_code_line(same_code | {"soak": older, "trl": edited})
    assert "tree `aaaa` (commits 1111111, 2222222): 6 benchmarks" in line
    assert "tree `bbbb` (commit 0000000): `soak`" in line
    assert "not recorded or uncommitted (commit 3333333+dirty): `trl`" in line
    assert line.index("`aaaa`") < line.index("`bbbb`")  # the largest group first


def test_the_package_tree_is_the_git_tree_of_the_imported_package_and_none_once_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    import _results  # pyright: ignore[reportMissingImports]

    package = tmp_path / "agl_bench_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "probe"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    expected = subprocess.run(
        [*git, "rev-parse", "--short=10", "HEAD:agl_bench_probe_pkg"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert _results.package_tree("agl_bench_probe_pkg") == expected
    (package / "extra.py").write_text("")  # an untracked module is a change too
    assert _results.package_tree("agl_bench_probe_pkg") is None
    assert _results.package_tree("agl_no_such_package_anywhere") is None


def test_values_are_shown_with_about_three_significant_digits() -> None:
    assert [summary_table.format_value(v) for v in (55770.4, 436.2, 12.34, 0.643, 3.7e-8, None)] == [
        "55,770", "436", "12.3", "0.64", "3.7e-08", "n/a",
    ]  # fmt: skip


def test_merging_keeps_the_newest_run_of_each_benchmark(tmp_path: Path) -> None:
    older, newer, results = tmp_path / "older", tmp_path / "newer", tmp_path / "results"
    for folder, date, value in ((older, "2026-11-25T10:00:00+00:00", 1.0), (newer, "2026-11-26T10:00:00+00:00", 2.0)):
        folder.mkdir()
        (folder / "bench.json").write_text(json.dumps(record(date, [figure("k", value)])))
    (older / "only_old.json").write_text(json.dumps(record("2026-11-25T10:00:00+00:00", [figure("o", 3.0)])))
    assert summary_table.merge_results([newer, older], results) == ["bench", "only_old"]
    merged = summary_table.load_results(results)
    assert merged["bench"]["figures"][0]["value"] == 2.0
    assert summary_table.merge_results([older], results) == []  # older than what is there: nothing changes


def test_a_file_that_is_not_a_result_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match=r"notes\.json: not a benchmark result"):
        summary_table.load_results(tmp_path)


def test_the_summary_replaces_only_the_text_between_the_markers() -> None:
    document = f"# Title\n\nintro\n\n{summary_table.BEGIN}\nold table\n{summary_table.END}\n\n## Below\n"
    updated = summary_table.replace_summary(document, f"{summary_table.BEGIN}\nnew\n{summary_table.END}")
    assert updated == f"# Title\n\nintro\n\n{summary_table.BEGIN}\nnew\n{summary_table.END}\n\n## Below\n"


def test_a_document_without_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="summary:begin"):
        summary_table.replace_summary("# no markers\n", "x")


# ----------------------------------------------------------------------------------------------------- run_all.py
OK_SCRIPT = f"""
import argparse, sys
sys.path.insert(0, {str(BENCHMARKS)!r})
from _results import Figure, add_json_argument, write_results
parser = argparse.ArgumentParser()
parser.add_argument("--size", type=int, required=True)
add_json_argument(parser)
args = parser.parse_args()
write_results(args.json, [Figure(key="fake.size", label="fake size", value=args.size, unit="items")])
"""
FAILING_SCRIPT = """
import sys
print("working...")
print("the fake benchmark broke: no database", file=sys.stderr)
sys.exit(3)
"""

UNAVAILABLE_SCRIPT = f"""
import sys
sys.path.insert(0, {str(BENCHMARKS)!r})
from _results import exit_unavailable
exit_unavailable("the fake engine is not installed: set FAKE_ENGINE")
"""


@pytest.fixture
def fake_benchmarks(tmp_path: Path) -> Path:
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "ok.py").write_text(textwrap.dedent(OK_SCRIPT))
    (folder / "failing.py").write_text(textwrap.dedent(FAILING_SCRIPT))
    (folder / "unavailable.py").write_text(textwrap.dedent(UNAVAILABLE_SCRIPT))
    return folder


def test_a_failing_benchmark_is_reported_and_the_others_still_run(fake_benchmarks: Path, tmp_path: Path) -> None:
    registry = [
        run_all.Benchmark("failing", "failing.py", [], [], ("fake.*",), 60),
        run_all.Benchmark("ok", "ok.py", ["--size", "2"], ["--size", "200"], ("fake.size",), 60),
    ]
    outcomes = run_all.run_all(registry, quick=True, out_dir=tmp_path / "out", benchmarks_dir=fake_benchmarks)
    failing, ok = outcomes
    assert (failing.status, failing.exit_code) == ("failed", 3)
    assert "the fake benchmark broke: no database" in failing.error_tail
    assert ok.status == "ok" and ok.record is not None and ok.record["figures"][0]["value"] == 2
    assert "package_tree" in ok.record  # the package code it ran (None while agentlightning/ has uncommitted changes)
    assert json.loads((tmp_path / "out" / "ok.json").read_text())["run_all"] == {"benchmark": "ok", "mode": "quick"}
    text = run_all.report(outcomes, [], tmp_path / "out")
    assert "FAILED failing: failed (exit code 3)" in text and "the fake benchmark broke" in text
    assert "fake size" in text and "`ok` (quick)" in text and "1 of 2 benchmarks ran" in text


def test_run_all_exits_1_when_a_benchmark_fails(
    fake_benchmarks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = [
        run_all.Benchmark("failing", "failing.py", [], [], (), 60),
        run_all.Benchmark("ok", "ok.py", ["--size", "1"], ["--size", "1"], (), 60),
    ]
    monkeypatch.setattr(run_all, "REGISTRY", registry)
    monkeypatch.setattr(run_all, "BENCHMARKS", fake_benchmarks)
    assert run_all.main(["--quick", "--out", str(tmp_path / "all")]) == 1
    assert run_all.main(["--quick", "--only", "ok", "--out", str(tmp_path / "only")]) == 0
    assert (tmp_path / "only" / "ok.json").is_file() and not (tmp_path / "only" / "failing.json").exists()


def test_a_benchmark_whose_engine_is_not_installed_is_reported_as_not_run_not_as_failed(
    fake_benchmarks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = [
        run_all.Benchmark("unavailable", "unavailable.py", [], [], ("fake.*",), 60),
        run_all.Benchmark("ok", "ok.py", ["--size", "1"], ["--size", "1"], (), 60),
    ]
    outcomes = run_all.run_all(registry, quick=True, out_dir=tmp_path / "out", benchmarks_dir=fake_benchmarks)
    assert (outcomes[0].status, outcomes[0].failed, outcomes[0].exit_code) == ("unavailable", False, 69)
    text = run_all.report(outcomes, [], tmp_path / "out")
    assert "not run on this machine, unavailable: unavailable here: the fake engine is not installed" in text
    assert "FAILED" not in text and "1 of 2 benchmarks ran" in text
    monkeypatch.setattr(run_all, "REGISTRY", registry)
    monkeypatch.setattr(run_all, "BENCHMARKS", fake_benchmarks)
    assert run_all.main(["--quick", "--out", str(tmp_path / "all")]) == 0


def test_a_missing_script_is_reported_as_missing(fake_benchmarks: Path, tmp_path: Path) -> None:
    benchmark = run_all.Benchmark("absent", "absent.py", [], [], (), 60)
    outcome = run_all.run_benchmark(benchmark, True, tmp_path, benchmarks_dir=fake_benchmarks)
    assert outcome.status == "script missing" and outcome.failed
    assert "absent.py does not exist" in outcome.error_tail[0]


def test_the_full_arguments_are_used_outside_quick_mode(fake_benchmarks: Path, tmp_path: Path) -> None:
    benchmark = run_all.Benchmark("ok", "ok.py", ["--size", "2"], ["--size", "200"], ("fake.size",), 60)
    outcome = run_all.run_benchmark(benchmark, False, tmp_path, benchmarks_dir=fake_benchmarks)
    assert outcome.record is not None and outcome.record["figures"][0]["value"] == 200


def test_a_run_that_writes_none_of_its_keys_says_so(fake_benchmarks: Path, tmp_path: Path) -> None:
    benchmark = run_all.Benchmark("ok", "ok.py", ["--size", "2"], [], ("other.*",), 60)
    outcome = run_all.run_benchmark(benchmark, True, tmp_path, benchmarks_dir=fake_benchmarks)
    assert outcome.missing_keys == ["other.*"]
    assert "ok: wrote no figure matching other.*" in run_all.report([outcome], [], tmp_path)


def test_quick_mode_skips_full_only_benchmarks_and_unknown_names_are_refused() -> None:
    registry = [run_all.Benchmark("short", "s.py", [], [], ()), run_all.Benchmark("long", "l.py", None, [], ())]
    chosen, skipped = run_all.select(registry, [], quick=True)
    assert [b.name for b in chosen] == ["short"] and skipped == ["long"]
    assert [b.name for b in run_all.select(registry, [], quick=False)[0]] == ["short", "long"]
    with pytest.raises(SystemExit, match="unknown benchmark"):
        run_all.select(registry, ["nope"], quick=True)


def test_excluded_benchmarks_are_left_out_and_an_unknown_exclusion_is_refused() -> None:
    registry = [run_all.Benchmark("a", "a.py", [], [], ()), run_all.Benchmark("b", "b.py", [], [], ())]
    assert [b.name for b in run_all.select(registry, [], quick=False, exclude=["a"])[0]] == ["b"]
    with pytest.raises(SystemExit, match="unknown benchmark"):
        run_all.select(registry, [], quick=False, exclude=["nope"])


def test_waiting_for_quiet_returns_once_the_load_falls_to_the_threshold() -> None:
    loads = iter([4.0, 2.5, 0.9, 0.5])
    slept: list[float] = []
    load, waited = run_all.wait_for_quiet(1.0, 60, read_load=lambda: next(loads), sleep=slept.append, poll_s=5)
    assert load == 0.9 and waited == 10 and slept == [5, 5]


def test_waiting_for_quiet_gives_up_after_the_longest_wait() -> None:
    slept: list[float] = []
    load, waited = run_all.wait_for_quiet(1.0, 12, read_load=lambda: 3.0, sleep=slept.append, poll_s=5)
    assert load == 3.0 and waited == 12 and slept == [5, 5, 2]


def test_no_threshold_means_no_wait() -> None:
    slept: list[float] = []
    assert run_all.wait_for_quiet(None, 60, read_load=lambda: 9.0, sleep=slept.append) == (9.0, 0.0)
    assert slept == []


def test_every_registered_script_in_the_repository_writes_json_through_results() -> None:
    for benchmark in run_all.REGISTRY:
        script = BENCHMARKS / benchmark.script
        if script.is_file():  # some scripts come from other branches; run_all reports a missing one
            assert "add_json_argument" in script.read_text(), f"{benchmark.script} takes no --json"


def test_write_docs_merges_a_run_and_regenerates_the_overview_and_the_full_table(tmp_path: Path) -> None:
    run, results = tmp_path / "run", tmp_path / "results"
    doc, appendix = tmp_path / "benchmarks.md", tmp_path / "benchmarks-appendix.md"
    run.mkdir()
    (run / "proxy_latency.json").write_text(json.dumps(record("2026-11-26T07:00:00+00:00", [figure("p", 0.64)])))
    doc.write_text(f"# B\n\n{overview.BEGIN}\n{overview.END}\n\n## More\n")
    appendix.write_text(f"# A\n\n{summary_table.BEGIN}\n{summary_table.END}\n\n## History\n")
    run_all.write_docs([run], results, doc, appendix)
    assert (results / "proxy_latency.json").is_file()
    text = appendix.read_text()
    assert "| p | 0.64 ops/s |" in text and "`proxy_latency`" in text and text.endswith("\n\n## History\n")
    text = doc.read_text()
    assert "p: **0.64 ops/s**" in text and "`run_all.py --only proxy_latency`" in text and text.endswith("## More\n")


def test_the_result_option_goes_before_the_options_a_benchmark_passes_on(fake_benchmarks: Path, tmp_path: Path) -> None:
    benchmark = run_all.Benchmark("ok", "ok.py", ["--size", "2", "--", "--passed-on"], [], ("fake.size",), 60)
    run_all.run_benchmark(benchmark, True, tmp_path, benchmarks_dir=fake_benchmarks)
    command = (tmp_path / "ok.log").read_text().splitlines()[0].split()
    assert command[-4:] == ["--json", command[-3], "--", "--passed-on"] and command[-3].endswith("ok.json")
