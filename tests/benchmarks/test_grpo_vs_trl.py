"""benchmarks/grpo_vs_trl.py: presets, the alternating schedule, the one scoring helper both sides go through, the
figures it writes, and tiny end-to-end runs (a tiny random model, seconds of training)."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "grpo_vs_trl.py"


def load_script() -> ModuleType:
    name = "benchmarks_grpo_vs_trl"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


bench = load_script()
sides = sys.modules["_grpo_vs_trl_sides"]
BEFORE = {"strict": 0.2, "lenient": 0.3}


def run_result(side: str, seed: int, gain: Any, rate: Any, per_step: float, **more: Any) -> dict[str, Any]:
    return {
        "side": side,
        "seed": seed,
        "steps": 0 if gain is None else 5,
        "before": BEFORE,
        "after": None if gain is None else {"strict": 0.2 + gain, "lenient": 0.3 + gain},
        "gain": None if gain is None else {"strict": gain, "lenient": gain},
        "completions_per_s": rate,
        "seconds_per_step": per_step,
        "seconds_per_step_is_lower_bound": gain is None,
        "peak_rss_tree_mb": 1000,
        "load_average": {"before": 1.0, "after": 2.0},
        **more,
    }


# ------------------------------------------------------------------------------------------------ arguments
def test_the_full_preset_is_three_seeds_of_all_four_sides_for_twelve_minutes() -> None:
    args = bench.parse_args([])
    assert (args.minutes, args.seeds, args.sides) == (
        12.0,
        [0, 1, 2],
        ["ours-fp32", "ours-bf16", "trl-fp32", "trl-bf16"],
    )


def test_the_quick_preset_is_one_minute_of_seed_zero_in_float32() -> None:
    args = bench.parse_args(["--quick"])
    assert (args.minutes, args.seeds, args.sides) == (1.0, [0], ["ours-fp32", "trl-fp32"])


def test_explicit_sides_seeds_and_minutes_override_the_preset() -> None:
    args = bench.parse_args(["--quick", "--sides", "trl-bf16", "--seeds", "3,4", "--minutes", "2"])
    assert (args.minutes, args.seeds, args.sides) == (2.0, [3, 4], ["trl-bf16"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--minutes", "0"],
        ["--sides", "ours-fp16"],
        ["--sides", "ours-fp32,ours-fp32"],
        ["--seeds", "zero"],
        ["--seeds", "1,1"],
        ["--runners", "0"],
        ["--worker", "trl-fp32"],
    ],
)
def test_bad_arguments_are_rejected_naming_the_option(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        bench.parse_args(argv)
    assert exited.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_a_step_running_at_the_deadline_gets_a_quarter_of_the_budget_and_at_least_a_minute() -> None:
    assert bench.grace_seconds(12) == 180.0
    assert bench.grace_seconds(1) == 60.0


# ------------------------------------------------------------------------------------------------- schedule
def test_runs_alternate_between_ours_and_trl_and_every_other_seed_starts_with_trl() -> None:
    assert bench.schedule(list(bench.SIDES), [0, 1]) == [
        ("ours-fp32", 0),
        ("trl-fp32", 0),
        ("ours-bf16", 0),
        ("trl-bf16", 0),
        ("trl-fp32", 1),
        ("ours-fp32", 1),
        ("trl-bf16", 1),
        ("ours-bf16", 1),
    ]


def test_missing_trl_stops_before_any_run_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trl", None)  # `import trl` now raises ImportError
    ran: list[str] = []
    monkeypatch.setattr(bench, "run_one", lambda side, seed, args: ran.append(side))
    with pytest.raises(SystemExit) as exited:
        bench.main(["--quick"])
    message = str(exited.value.code)
    assert "trl==1.16.0" in message and "pip install" in message and "\n" not in message
    assert ran == []


def test_our_sides_alone_do_not_need_trl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "trl", None)
    monkeypatch.setattr(bench, "run_one", lambda side, seed, args: run_result(side, seed, 0.4, 2.0, 8.0))
    record = bench.main(["--sides", "ours-fp32,ours-bf16", "--seeds", "0", "--out", str(tmp_path)])
    assert [r["side"] for r in record["runs"]] == ["ours-fp32", "ours-bf16"]
    assert (tmp_path / "summary.json").exists()


def test_each_finished_run_is_in_runs_jsonl_before_the_next_one_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bench, "require_trl", lambda: None)
    seen: list[int] = []

    def one(side: str, seed: int, args: Any) -> dict[str, Any]:
        log = tmp_path / "runs.jsonl"
        seen.append(len(log.read_text().splitlines()) if log.exists() else 0)
        return run_result(side, seed, 0.4, 2.0, 8.0)

    monkeypatch.setattr(bench, "run_one", one)
    bench.main(["--quick", "--out", str(tmp_path)])
    assert seen == [0, 1]
    lines = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [line["result"]["side"] for line in lines] == ["ours-fp32", "trl-fp32"]
    assert lines[0]["settings"]["minutes"] == 1.0 and lines[0]["commit"]


def test_resume_runs_only_what_is_missing_with_the_same_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bench, "require_trl", lambda: None)
    ran: list[tuple[str, int]] = []

    def one(side: str, seed: int, args: Any) -> dict[str, Any]:
        ran.append((side, seed))
        return run_result(side, seed, 0.4, 2.0, 8.0)

    monkeypatch.setattr(bench, "run_one", one)
    bench.main(["--sides", "ours-fp32", "--seeds", "0", "--out", str(tmp_path)])
    bench.main(["--sides", "ours-fp32", "--seeds", "0", "--minutes", "3", "--out", str(tmp_path)])  # other budget
    ran.clear()
    record = bench.main(["--sides", "ours-fp32,trl-fp32", "--seeds", "0", "--out", str(tmp_path), "--resume"])
    assert ran == [("trl-fp32", 0)]
    assert [(r["side"], r["seed"]) for r in record["runs"]] == [("ours-fp32", 0), ("trl-fp32", 0)]


def test_resume_runs_again_a_run_that_failed_and_skips_an_unreadable_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "require_trl", lambda: None)
    failed = {"side": "ours-fp32", "seed": 0, "steps": 0, "gain": None, "error": "worker killed after 900 s"}
    args = bench.parse_args(["--sides", "ours-fp32", "--seeds", "0", "--out", str(tmp_path)])
    bench.RunLog(tmp_path / "runs.jsonl", bench.run_settings(args)).append(failed)
    with (tmp_path / "runs.jsonl").open("a") as f:
        f.write('{"commit": "abc", "result": {"side"\n')  # a run killed while its line was written
    ran: list[str] = []
    monkeypatch.setattr(
        bench, "run_one", lambda side, seed, a: ran.append(side) or run_result(side, seed, 0.4, 2.0, 8.0)
    )
    bench.main(["--sides", "ours-fp32", "--seeds", "0", "--out", str(tmp_path), "--resume"])
    assert ran == ["ours-fp32"]
    assert "runs.jsonl:2: skipped" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------- scoring
class Counter:
    """A stand-in model: one trainable weight; the held-out evaluation is patched to read it."""

    def __init__(self) -> None:
        torch = pytest.importorskip("torch")
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def named_parameters(self) -> list[tuple[str, Any]]:
        return [("weight", self.weight)]


def test_completions_per_second_count_completed_steps_over_training_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sides, "held_out_accuracy", lambda model, tokenizer, n: {"strict": 0.7, "lenient": 0.8})
    log = sides.TrainingLog(first_step_started=100.0)
    model = Counter()
    for completions in (16, 48):
        log.step_completed(completions, model)
    log.step_ends = [104.0, 116.0]
    figures = sides.score_run(log, model, None, BEFORE, 12)
    assert (figures["steps"], figures["completions"], figures["train_seconds"]) == (2, 64, 16.0)
    assert figures["completions_per_s"] == 4.0 and figures["seconds_per_step"] == 8.0
    assert figures["gain"] == {"strict": 0.5, "lenient": 0.5}


def test_our_steps_report_their_mean_seconds_by_part_and_trl_steps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sides, "held_out_accuracy", lambda model, tokenizer, n: BEFORE)
    log = sides.TrainingLog(first_step_started=100.0)
    model = Counter()
    for rollout, update in ((3.0, 2.0), (5.0, 4.0)):
        log.step_completed(16, model)
        log.add_step_parts({"rollout": rollout, "update": update, "weight_swap": 0.5, "total": 9.9})
    ours = sides.score_run(log, model, None, BEFORE, 12)
    assert ours["seconds_per_step_by_part"] == {"rollout": 4.0, "update": 3.0, "weight_swap": 0.5}
    trl_log = sides.TrainingLog(first_step_started=100.0)
    trl_log.step_completed(16, model)
    assert "seconds_per_step_by_part" not in sides.score_run(trl_log, model, None, BEFORE, 12)


def test_the_evaluation_sees_the_weights_of_the_last_completed_step(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []
    monkeypatch.setattr(
        sides, "held_out_accuracy", lambda model, tokenizer, n: seen.append(float(model.weight.detach())) or BEFORE
    )
    model = Counter()
    log = sides.TrainingLog(first_step_started=time.monotonic())
    model.weight.data.fill_(1.0)
    log.step_completed(16, model)
    model.weight.data.fill_(5.0)  # an interrupted step changed the weights half-way
    sides.score_run(log, model, None, BEFORE, 12)
    assert seen == [1.0]


def test_a_run_cut_off_before_its_first_step_has_no_gain_and_a_lower_bound_per_step() -> None:
    log = sides.TrainingLog(first_step_started=time.monotonic(), cut_off_after=241.5)
    figures = sides.score_run(log, Counter(), None, BEFORE, 12)
    assert (figures["steps"], figures["gain"], figures["completions_per_s"]) == (0, None, None)
    assert figures["seconds_per_step"] == 241.5 and figures["seconds_per_step_is_lower_bound"]


def test_the_strict_reward_is_the_agents_check_and_counts_what_it_scores() -> None:
    counter = [0]
    reward = sides.strict_reward(counter)
    completions = [[{"role": "assistant", "content": "7"}], [{"role": "assistant", "content": "Five + one = 6"}], "6."]
    assert reward(completions=completions, a=[3, 5, 5], b=[4, 1, 1], prompts=[]) == [1.0, 0.0, 1.0]
    assert counter == [3]


def test_the_split_is_the_examples_split_by_unordered_pair() -> None:
    train, held_out = sides.split_tasks()
    assert sides.split_tasks is sys.modules["arithmetic_rl_train"].split_tasks
    assert len(held_out) == 50 and not {(t["b"], t["a"]) for t in held_out} & {(t["a"], t["b"]) for t in train}


# --------------------------------------------------------------------------------------------------- figures
def test_the_summary_gives_mean_and_spread_over_seeds_and_counts_runs_without_a_step() -> None:
    runs = [run_result("trl-bf16", 0, None, None, 240.0), run_result("trl-bf16", 1, 0.1, 0.07, 230.0)]
    runs += [run_result("ours-fp32", s, g, 2.0 + s, 8.0) for s, g in ((0, 0.5), (1, 0.7))]
    summary = bench.summarise(runs, ["ours-fp32", "trl-bf16"])
    assert summary["ours-fp32"]["gain"] == {
        "mean": 0.6,
        "min": 0.5,
        "max": 0.7,
        "std": 0.1414,
        "n": 2,
        "values": [0.5, 0.7],
    }
    assert summary["trl-bf16"]["runs_without_a_step"] == 1 and summary["trl-bf16"]["gain"]["n"] == 1
    assert summary["trl-bf16"]["seconds_per_step_is_lower_bound"]


def test_figures_are_keyed_per_side_and_ours_has_trl_in_the_same_precision_as_its_peer() -> None:
    runs = [run_result("ours-fp32", 0, 0.6, 2.0, 8.0), run_result("trl-fp32", 0, 0.4, 1.0, 16.0)]
    runs += [run_result("ours-bf16", 0, 0.3, 0.5, 32.0), run_result("trl-bf16", 0, None, None, 240.0)]
    summary = bench.summarise(runs, list(bench.SIDES))
    figures = {f.key: f for f in bench.figures_of(summary, runs, 12.0)}
    gain = figures["grpo_vs_trl.ours_fp32.gain"]
    assert (gain.value, gain.peer.value, gain.met, gain.ratio) == (0.6, 0.4, True, pytest.approx(1.5))
    assert figures["grpo_vs_trl.trl_fp32.completions_per_s"].peer is None
    assert "grpo_vs_trl.trl_bf16.gain" not in figures  # no completed step: no gain to report
    assert figures["grpo_vs_trl.ours_bf16.gain"].peer is None
    per_step = figures["grpo_vs_trl.ours_bf16.seconds_per_step"]
    assert (per_step.peer.value, per_step.met, per_step.ratio) == (240.0, True, 7.5)
    assert per_step.detail["peer_lower_bound"]  # TRL's first step had not finished: the ratio is at least 7.5
    assert figures["grpo_vs_trl.trl_bf16.seconds_per_step"].detail["lower_bound"]
    assert gain.label.startswith("GRPO vs TRL, 12 min per run, 1 seed(s): ours-fp32")  # the budget is in the row


def test_json_records_the_figures_the_machine_and_per_run_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bench, "require_trl", lambda: None)
    monkeypatch.setattr(bench, "run_one", lambda side, seed, args: run_result(side, seed, 0.5, 2.0, 8.0))
    out = tmp_path / "results.json"
    bench.main(["--quick", "--out", str(tmp_path), "--json", str(out)])
    record = json.loads(out.read_text())
    assert {"cpu", "native_bf16"} <= set(record["machine"])
    keys = {f["key"] for f in record["figures"]}
    assert "grpo_vs_trl.ours_fp32.gain" in keys and "grpo_vs_trl.trl_fp32.completions_per_s" in keys
    rows = next(f for f in record["figures"] if f["key"] == "grpo_vs_trl.ours_fp32.gain")["detail"]["runs"]
    assert rows[0]["seed"] == 0 and rows[0]["load_average"] == {"before": 1.0, "after": 2.0}


def test_the_table_marks_a_lower_bound_per_step_and_a_missing_gain() -> None:
    rows = bench.table([run_result("trl-bf16", 0, None, None, 241.5)]).splitlines()
    assert rows[2] == "| trl-bf16 | 0 | 0 | 0.20 -> n/a | 0.30 -> n/a | n/a | > 241.5 | 1000 | 1.0 -> 2.0 |"


# ------------------------------------------------------------------------------------------ tiny end-to-end
@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("peft")
    from agentlightning.inference.tiny import build_tiny_engine

    folder = tmp_path_factory.mktemp("tiny-model")
    engine = build_tiny_engine(seed=0)
    engine.model.save_pretrained(folder)
    engine.tokenizer.save_pretrained(folder)
    return folder


def worker(side: str, folder: Path, tmp_path: Path) -> dict[str, Any]:
    result = tmp_path / "result.json"
    argv = ["--worker", side, "--seeds", "0", "--minutes", "0.02", "--runners", "1", "--model-folder", str(folder)]
    bench.main([*argv, "--out", str(tmp_path / "runs"), "--result-file", str(result)])
    return json.loads(result.read_text())


@pytest.mark.slow
def test_our_side_trains_a_tiny_model_and_is_scored(tiny_folder: Path, tmp_path: Path) -> None:
    figures = worker("ours-fp32", tiny_folder, tmp_path)
    assert figures["steps"] >= 1 and figures["completions"] >= 16 and figures["completions_per_s"] > 0
    assert figures["gain"] is not None and figures["facts"]["policy_autocast"] == "None"


@pytest.mark.slow
def test_trl_trains_the_same_tiny_model_and_is_scored_the_same_way(tiny_folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    figures = worker("trl-fp32", tiny_folder, tmp_path)
    assert figures["steps"] >= 1 and figures["completions"] == 16 * figures["steps"]
    assert figures["gain"] is not None and figures["facts"]["model_dtype"] == "torch.float32"
