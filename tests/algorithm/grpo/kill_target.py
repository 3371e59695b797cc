"""A GRPO run on the tiny model that the resume test kills with SIGKILL and starts again.

python -m tests.algorithm.grpo.kill_target <run_dir> <max_steps>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.inference.tiny import build_tiny_engine

from .agents import digit_agent


def main() -> None:
    agl.setup_logging("INFO")
    run_dir = Path(sys.argv[1])
    algorithm = GRPO(
        engine=build_tiny_engine(seed=0),
        output_dir=run_dir,
        group_size=4,
        tasks_per_step=1,
        learning_rate=1e-2,
        checkpoint_every=1,
        max_steps=int(sys.argv[2]),
        on_event=lambda kind, _: (run_dir / "updating").touch() if kind == "update" else None,
    )
    trainer = agl.Trainer(
        algorithm=algorithm, n_runners=1, strategy="cs", store=f"sqlite:///{run_dir}/store.db", progress="off"
    )
    trainer.fit(digit_agent, [{"id": i} for i in range(4)])
    (run_dir / "result.json").write_text(
        json.dumps({"resumed_from": algorithm.resumed_from, "steps": [e["step"] for e in algorithm.history]})
    )


if __name__ == "__main__":
    main()
