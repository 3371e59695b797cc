"""What a GRPO run with an `output_dir` leaves without any script of its own: summary.json (with the health verdict,
the evaluations and the seconds of each phase), the plots and the trained model; the same after Ctrl-C; and an INFO
log that shows the steps, not the runners.

One real run (Trainer, runner processes, tiny model, two steps) in a fresh process, as a user would start it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import sys

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.inference.tiny import build_tiny_engine
from tests.algorithm.grpo.agents import digit_agent

if __name__ == "__main__":
    agl.setup_logging("INFO")
    algorithm = GRPO(
        engine=build_tiny_engine(seed=0), output_dir=sys.argv[1], group_size=4, tasks_per_step=2, max_steps=2,
        max_minutes=30, learning_rate=3e-2, seed=0, truncated="keep",  # the tiny model runs to max_tokens
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, progress="off")
    trainer.fit(digit_agent, [{"id": i} for i in range(8)], val_dataset=[{"id": 100 + i} for i in range(4)])
"""


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(the run directory, the run's stderr) of a two-step run with a held-out set."""
    folder = tmp_path_factory.mktemp("outputs")
    script = folder / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    run_dir = folder / "run"
    result = subprocess.run(
        [sys.executable, str(script), str(run_dir)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return run_dir, result.stderr


def test_a_run_with_an_output_dir_writes_its_summary_with_the_verdict_and_the_evaluations(
    finished_run: tuple[Path, str],
) -> None:
    run_dir, _ = finished_run
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and len(summary["history"]) == 2
    assert set(summary["evaluations"]) == {"before", "after"}
    assert len(summary["evaluations"]["after"]["items"]) == 4
    assert summary["health"]["verdict"]["tasks"] == 4
    assert summary["final_model"] == str(run_dir / "final_model")


def test_the_summary_records_the_seconds_of_each_phase_outside_max_minutes(finished_run: tuple[Path, str]) -> None:
    run_dir, stderr = finished_run
    seconds = json.loads((run_dir / "summary.json").read_text())["seconds"]
    assert set(seconds) == {"evaluation_before", "training", "evaluation_after", "total"}
    assert seconds["total"] >= seconds["evaluation_before"] + seconds["training"] + seconds["evaluation_after"]
    assert "max_minutes=30 bounds the training steps" in stderr


def test_a_run_with_an_output_dir_writes_the_plots_and_the_trained_model(finished_run: tuple[Path, str]) -> None:
    run_dir, _ = finished_run
    assert (run_dir / "reward_curve.png").stat().st_size > 0
    assert (run_dir / "accuracy.png").stat().st_size > 0
    assert (run_dir / "final_model" / "config.json").is_file()
    assert list((run_dir / "final_model").glob("*.safetensors"))


def test_info_logging_shows_the_steps_not_runner_or_weight_swap_lines(finished_run: tuple[Path, str]) -> None:
    _, stderr = finished_run
    steps = [line for line in stderr.splitlines() if "[INFO]" in line and re.search(r"GRPO step \d+: reward", line)]
    assert len(steps) == 2
    assert "agentlightning.runner" not in stderr
    assert "updated in place" not in stderr and "Loaded weights version" not in stderr


def test_an_interrupted_run_still_writes_the_summary_of_what_ran(tmp_path: Path) -> None:
    import agentlightning as agl
    from agentlightning.algorithm.grpo import GRPO
    from agentlightning.inference.tiny import build_tiny_engine

    from .agents import digit_agent

    def stop_after_the_first_step(kind: str, payload: dict[str, Any]) -> None:
        if kind == "step":
            raise KeyboardInterrupt

    algorithm = GRPO(
        engine=build_tiny_engine(seed=0),
        output_dir=tmp_path / "run",
        save_final_model=False,
        group_size=2,
        tasks_per_step=1,
        max_steps=5,
        on_event=stop_after_the_first_step,
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=1, strategy="cs", progress="off")
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(digit_agent, [{"id": i} for i in range(4)])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["final_model"] is None
    assert "training" in summary["seconds"]
    assert not (tmp_path / "run" / "final_model").exists()
    assert (tmp_path / "run" / "reward_curve.png").exists()


def test_without_matplotlib_the_plots_are_skipped_with_one_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from agentlightning.algorithm.grpo import report

    def no_matplotlib() -> Any:
        raise RuntimeError("Plots need matplotlib: `pip install 'agentlightning[plot]'`")

    monkeypatch.setattr(report, "_pyplot", no_matplotlib)
    history = [{"step": 1, "reward_mean": 0.5}]
    evaluation = {"before": {"mean_reward": 0.1}, "after": {"mean_reward": 0.2}}
    algorithm = SimpleNamespace(policy=None, summary=lambda: {"history": history, "evaluations": evaluation})
    with caplog.at_level(logging.WARNING, logger="agentlightning.algorithm.grpo.report"):
        report.write_run_outputs(algorithm, tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text())["history"] == history
    assert not list(tmp_path.glob("*.png"))
    assert [r.getMessage() for r in caplog.records if "matplotlib" in r.getMessage()] != []
    assert len(caplog.records) == 1
