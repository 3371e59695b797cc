"""The JavaScript agent (examples/node_agent/): a program run once per rollout by CommandAgent, its calls captured
through the LLM proxy with token ids, and trained by GRPO (one step on a tiny model)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")

from ._load import load

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None or shutil.which("npm") is None, reason="Node.js and npm are not installed")

train = load("node_agent", "train")


def test_the_split_keeps_the_worked_examples_out_and_shares_no_country() -> None:
    training, held_out = train.tasks(20)
    countries = [t["country"] for t in training + held_out]
    assert len(held_out) == 20 and len(set(countries)) == len(countries)
    assert not set(train.EXAMPLES) & set(countries)
    assert train.tasks(20) == (training, held_out)


def test_the_agents_tool_and_reward_rules() -> None:
    train.ensure_node_packages()
    script = (
        "import {capitalOf, reward} from './agent.mjs';"
        "console.log(JSON.stringify([capitalOf('{\"country\": \"peru\"}'), capitalOf('not json'),"
        " capitalOf({country: 'Atlantis'}), reward('Lima.', {capital: 'Lima'}), reward('lima is it', {capital: 'Lima'})]))"
    )
    output = subprocess.run(
        [NODE, "--input-type=module", "-e", script],
        cwd=train.HERE,
        capture_output=True,
        text=True,
        check=True,  # type: ignore[list-item]
    )
    assert json.loads(output.stdout) == [
        "Lima", "error: the arguments are not valid JSON", 'error: unknown country "Atlantis"', 1, 0,
    ]  # fmt: skip


def test_one_grpo_step_trains_the_javascript_agent_on_calls_captured_with_token_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    run_dir = tmp_path / "run"
    summary = train.main(
        ["--tiny", "--max-steps", "1", "--run-dir", str(run_dir), "--held-out", "2", "--group-size", "2",
         "--tasks-per-step", "1", "--runners", "2"]
    )  # fmt: skip
    assert summary["steps"] == 1
    step = summary["history"][0]
    assert step["rollouts"] >= 2 and step["calls_per_rollout"] >= 1
    assert step["skips"]["rollouts_failed"] == 0 and step["skips"]["rollouts_without_token_ids"] == 0
    assert summary["held_out_accuracy"]["before"] is not None and summary["held_out_accuracy"]["after"] is not None
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 1
    assert (run_dir / "reward_curve.png").exists() and (run_dir / "final_model").is_dir()
    assert os.environ.get("OPENAI_BASE_URL") is None  # the agent's URL went to its process only
