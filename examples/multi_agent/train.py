"""Train only the solver of a two-agent system with GRPO (`agent_match="solver"`).

python examples/multi_agent/train.py --minutes 5      # SmolLM2-135M-Instruct
python examples/multi_agent/train.py --tiny           # a tiny random model (seconds; the smoke test)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from team import solver_and_reviewer  # not `agents`: that is the OpenAI Agents SDK's package

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.tracer.otel import OtelTracer


def main(argv: Optional[list[str]] = None) -> GRPO:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--run-dir", default="runs/multi_agent")
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="a tiny random model instead of SmolLM2")
    args = parser.parse_args(argv)
    agl.setup_logging("INFO")
    Path(args.run_dir).mkdir(parents=True, exist_ok=True)
    engine = None
    if args.tiny:
        from agentlightning.inference.tiny import build_tiny_engine

        engine = build_tiny_engine(seed=0)
    tasks = [{"a": a, "b": b} for a in range(10) for b in range(10)]
    algorithm = GRPO(
        engine=engine,
        output_dir=args.run_dir,
        agent_match="solver",  # train the solver's calls; the reviewer's stay out of every batch
        group_size=4,
        tasks_per_step=2,
        learning_rate=3e-4,
        lora_rank=8,
        max_minutes=args.minutes,
        max_steps=args.max_steps if args.max_steps is not None or args.minutes is not None else 20,
    )
    trainer = agl.Trainer(
        algorithm=algorithm,
        n_runners=args.runners,
        tracer=OtelTracer(instrument=["openai"]),  # client-side capture: agent spans and the calls' token ids
        store=f"sqlite:///{Path(args.run_dir) / 'store.db'}",
        progress="off",
    )
    trainer.fit(solver_and_reviewer, tasks)
    return algorithm


if __name__ == "__main__":
    main()
