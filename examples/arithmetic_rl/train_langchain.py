"""Train the LangChain arithmetic agent with GRPO through zero-code capture.

The runners capture the agent's calls client-side (`OtelTracer(instrument=["langchain", "openai"])`), with the
exact token ids the server returned, and GRPO trains on those calls (each step's history counts them under
`calls_from["adapter"]`; `calls_from["proxy"]` would count calls taken from the LLM proxy's records instead).

    python examples/arithmetic_rl/train_langchain.py --minutes 5
    python examples/arithmetic_rl/train_langchain.py --tiny --max-steps 2 --run-dir /tmp/lc   # seconds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain_agent import langchain_arithmetic_agent

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO
from agentlightning.tracer.otel import OtelTracer


def main(argv: Optional[list[str]] = None) -> GRPO:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--run-dir", default="runs/arithmetic_langchain")
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
        group_size=4,
        tasks_per_step=2,
        learning_rate=3e-4,
        lora_rank=16,
        max_minutes=args.minutes,
        max_steps=args.max_steps if args.max_steps is not None or args.minutes is not None else 20,
    )
    trainer = agl.Trainer(
        algorithm=algorithm,
        n_runners=args.runners,
        tracer=OtelTracer(instrument=["langchain", "openai"]),
        store=f"sqlite:///{Path(args.run_dir) / 'store.db'}",
    )
    trainer.fit(langchain_arithmetic_agent, tasks)
    return algorithm


if __name__ == "__main__":
    main()
