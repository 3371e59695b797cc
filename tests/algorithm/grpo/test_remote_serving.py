"""GRPO with a separately started inference server: new weights reach it as a Hugging Face folder + POST /v1/weights."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.inference.server import InferenceServer
from agentlightning.inference.tiny import build_tiny_engine

from .agents import digit_agent


def test_weights_are_published_to_a_server_by_folder_and_http(tmp_path: Path) -> None:
    engine = build_tiny_engine(seed=0)
    folder = tmp_path / "base"
    engine.model.save_pretrained(str(folder))
    engine.tokenizer.save_pretrained(str(folder))
    with InferenceServer(engine) as server:
        algorithm = GRPO(
            model=folder,
            server_url=server.endpoint,
            output_dir=tmp_path / "run",
            group_size=8,
            tasks_per_step=2,
            learning_rate=3e-2,
            max_steps=3,
        )
        trainer = agl.Trainer(algorithm=algorithm, n_runners=2, strategy="cs", progress="off")
        trainer.fit(digit_agent, [{"id": i} for i in range(4)])
        updated = [entry["step"] for entry in algorithm.history if entry["samples"]]
        assert updated, "the digit reward varies, so at least one step updates"
        assert engine.weights_version == f"step-{updated[-1]}"
        published = sorted(p.name for p in (tmp_path / "run" / "published").iterdir())
        assert published == [f"step-{updated[-1]}"]  # older published folders are removed
        assert (tmp_path / "run" / "published" / published[0] / "config.json").exists()


def test_server_url_without_model_folder_is_rejected() -> None:
    with pytest.raises(ValueError, match="model="):
        GRPO(server_url="http://127.0.0.1:1/v1", output_dir="x")
