"""What GRPO's vLLM tests share: the tiny model saved as a folder, a fake vLLM in front of it, and a short training
run with `serving="vllm"` (fake or real server alike)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.algorithm.grpo.rollouts.agents import AgentMatch

RUN_SETTINGS: dict[str, Any] = {
    "group_size": 4,
    "tasks_per_step": 2,
    "informative_groups": 0,
    "max_steps": 2,
}
"""Two steps of two tasks, four rollouts each; every group counts (no sampling for informative groups)."""


def save_tiny_model(folder: Path) -> Path:
    """The tiny test model (seed 0) saved as a Hugging Face folder, as vLLM (or the fake) loads it."""
    from agentlightning.inference.tiny import build_tiny_engine

    engine = build_tiny_engine(seed=0)
    engine.model.save_pretrained(str(folder))
    engine.tokenizer.save_pretrained(str(folder))
    return folder


def train_on_vllm(
    agent: Any,
    tasks: Sequence[Any],
    *,
    model: Path,
    vllm: dict[str, Any],
    output_dir: Path,
    agent_match: AgentMatch = None,
    tracer: Optional[Any] = None,
    store: Optional[Any] = None,
    **settings: Any,
) -> GRPO:
    """Train `agent` on `tasks` with GRPO sampling from vLLM (two runner processes; `RUN_SETTINGS` unless
    overridden); returns the algorithm, for its history."""
    algorithm = GRPO(
        model=model,
        serving="vllm",
        vllm=vllm,
        output_dir=output_dir,
        agent_match=agent_match,
        **{**RUN_SETTINGS, **settings},
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, strategy="cs", progress="off", tracer=tracer, store=store)
    trainer.fit(agent, list(tasks))
    return algorithm
