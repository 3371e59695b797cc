"""benchmarks/grpo_vs_trl.py without training: its arguments, the message when TRL is missing, its scoring."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

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
HELD_OUT = [{"a": 3, "b": 4}, {"a": 5, "b": 1}, {"a": 2, "b": 2}, {"a": 9, "b": 0}]


def test_defaults_compare_both_sides_for_twelve_minutes_with_lora_and_the_strict_reward() -> None:
    args = bench.parse_args([])
    assert (args.side, args.minutes, args.full, args.trl_reward) == ("both", 12.0, False, "strict")
    assert not args.trl_bf16  # fp32 on both sides unless asked
    assert bench.learning_rate(args) == 3e-4


def test_full_fine_tune_defaults_to_a_smaller_learning_rate_and_an_explicit_one_wins() -> None:
    assert bench.learning_rate(bench.parse_args(["--full"])) == 1e-5
    assert bench.learning_rate(bench.parse_args(["--full", "--learning-rate", "3e-5"])) == 3e-5


@pytest.mark.parametrize(
    "argv", [["--minutes", "0"], ["--learning-rate", "-1"], ["--side", "vllm"], ["--trl-reward", "first-int"]]
)
def test_bad_arguments_are_rejected(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        bench.parse_args(argv)
    assert exited.value.code == 2
    assert "error" in capsys.readouterr().err


def test_missing_trl_stops_before_training_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trl", None)  # `import trl` now raises ImportError
    ran: list[str] = []
    monkeypatch.setattr(bench, "run_side", lambda side, args: ran.append(side))
    with pytest.raises(SystemExit) as exited:
        bench.main(["--minutes", "1"])
    message = str(exited.value.code)
    assert "trl==1.16.0" in message and "pip install" in message and "\n" not in message
    assert ran == []


def test_our_side_alone_does_not_need_trl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "trl", None)
    figures = {
        "steps": 3,
        "completions": 48,
        "completions_per_second": 2.0,
        "accuracy": {"before": {"strict": 0.2, "lenient": 0.3}, "after": {"strict": 0.5, "lenient": 0.5}},
        "reward": "strict",
        "peak_rss_mb": 1000.0,
        "peak_rss_tree_mb": 1800.0,
        "load_average": {"before": (1.0, 2.0, 3.0), "after": (1.5, 2.0, 3.0)},
    }
    monkeypatch.setattr(bench, "run_side", lambda side, args: figures)
    summary = bench.main(["--side", "ours", "--minutes", "1", "--out", str(tmp_path)])
    assert list(summary["results"]) == ["ours"]
    assert (tmp_path / "summary.json").exists()


def test_strict_scoring_does_not_count_a_sentence_that_the_lenient_check_accepts() -> None:
    answers = ["7", "Five + one = 6", "4.", None]
    assert bench.score(HELD_OUT, answers) == {"strict": 0.5, "lenient": 0.75}


def test_the_strict_trl_reward_is_the_agents_reward_and_lenient_is_gameable() -> None:
    completions = [[{"role": "assistant", "content": "7"}], [{"role": "assistant", "content": "Five + one = 6"}]]
    a, b = [3, 5], [4, 1]
    assert bench.reward_for("strict")(completions=completions, a=a, b=b, prompts=[]) == [1.0, 0.0]
    assert bench.reward_for("lenient")(completions=completions, a=a, b=b, prompts=[]) == [1.0, 1.0]


def test_the_table_has_one_row_per_side_with_both_checks() -> None:
    result = {
        "steps": 10,
        "completions_per_second": 1.234,
        "accuracy": {"before": {"strict": 0.2, "lenient": 0.22}, "after": {"strict": 0.6, "lenient": None}},
        "reward": "lenient",
        "peak_rss_mb": 2700.4,
        "peak_rss_tree_mb": 2701.0,
        "load_average": {"before": [1.0, 2.0, 3.0], "after": [4.0, 5.0, 6.0]},
    }
    rows = bench.table({"trl": result}).splitlines()
    assert len(rows) == 3
    assert (
        rows[2]
        == "| trl | lenient | 10 | 0.20 -> 0.60 | 0.22 -> n/a | 1.23 | 2700 / 2701 | 1.0 2.0 3.0 -> 4.0 5.0 6.0 |"
    )
