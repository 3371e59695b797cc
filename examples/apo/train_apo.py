"""Optimize the topic agent's prompt with APO, then report validation and held-out accuracy.

    python examples/apo/train_apo.py                        # SmolLM2-135M-Instruct as agent and optimizer
    python examples/apo/train_apo.py --optimizer scripted   # the rule-based optimizer endpoint (scripted_optimizer.py)

Endpoints come from environment variables; whatever is unset is served by the local inference server
(`agl serve`'s engine, started in this process with the embedded SmolLM2-135M-Instruct):

    AGENT_BASE_URL, AGENT_MODEL, AGENT_API_KEY                  the agent's model
    OPTIMIZER_BASE_URL, OPTIMIZER_API_KEY                       the optimizer endpoint (any OpenAI-compatible server)
    OPTIMIZER_GRADIENT_MODEL, OPTIMIZER_EDIT_MODEL              its models for critiques and rewrites

The run goes through the real Trainer (runner processes, the store served over HTTP). APO critiques with the training
split and scores with the validation split; the test split is only used at the end, to report the held-out accuracy
of the seed prompt and of the best prompt. A JSON summary and a plot of the scores go to `--out`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from topic_agent import SEED_PROMPT, classify, load_split, score, topic_agent

import agentlightning as agl

logger = logging.getLogger("apo_example")


@dataclass
class Endpoint:
    base_url: str
    api_key: str
    models: tuple[str, ...]


@contextmanager
def local_inference() -> Iterator[Endpoint]:
    """The embedded SmolLM2-135M-Instruct behind an OpenAI-compatible API on a free loopback port."""
    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.inference.server import InferenceServer

    engine = InferenceEngine.from_default()
    with InferenceServer(engine) as server:
        yield Endpoint(server.endpoint, "local", (engine.model_name,))


@contextmanager
def scripted_optimizer() -> Iterator[Endpoint]:
    from scripted_optimizer import create_app

    from agentlightning.utils.uvicorn_thread import UvicornThread

    thread = UvicornThread(create_app(), name="scripted-optimizer")
    thread.start()
    try:
        yield Endpoint(f"http://127.0.0.1:{thread.port}/v1", "scripted", ("scripted-critic", "scripted-editor"))
    finally:
        thread.stop()


def endpoints(stack: ExitStack, optimizer: str) -> tuple[Endpoint, Endpoint]:
    """(agent, optimizer) endpoints from the environment, the local server or the scripted optimizer."""
    local: Optional[Endpoint] = None

    def local_server() -> Endpoint:
        nonlocal local
        if local is None:
            local = stack.enter_context(local_inference())
        return local

    if os.environ.get("AGENT_BASE_URL"):
        agent = Endpoint(
            os.environ["AGENT_BASE_URL"],
            os.environ.get("AGENT_API_KEY", "unused"),
            (os.environ.get("AGENT_MODEL", "gpt-4.1-nano"),),
        )
    else:
        agent = local_server()
    if optimizer == "scripted":
        return agent, stack.enter_context(scripted_optimizer())
    if os.environ.get("OPTIMIZER_BASE_URL"):
        return agent, Endpoint(
            os.environ["OPTIMIZER_BASE_URL"],
            os.environ.get("OPTIMIZER_API_KEY", "unused"),
            (
                os.environ.get("OPTIMIZER_GRADIENT_MODEL", "gpt-5-mini"),
                os.environ.get("OPTIMIZER_EDIT_MODEL", "gpt-4.1-mini"),
            ),
        )
    return agent, local_server()


async def accuracy(llm: agl.LLM, template: agl.PromptTemplate, tasks: list[dict[str, str]], concurrency: int) -> float:
    """Held-out accuracy of a prompt: the agent's own classify() and score() on every task."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(task: dict[str, str]) -> float:
        async with semaphore:
            try:
                return score(await classify(llm, template, task["text"]), task["label"])
            except Exception as exc:  # a prompt whose placeholders the agent cannot fill scores 0
                logger.warning("Test rollout failed: %r", exc)
                return 0.0

    results = await asyncio.gather(*(one(task) for task in tasks))
    return sum(results) / len(results)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimizer", choices=["model", "scripted"], default="model")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--beam-width", type=int, default=2)
    parser.add_argument("--branch-factor", type=int, default=2)
    parser.add_argument("--gradient-batch-size", type=int, default=4)
    parser.add_argument("--val-batch-size", type=int, default=8)
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--optimizer-max-tokens", type=int, default=300)
    parser.add_argument("--rollout-timeout", type=float, default=1800.0, help="APO's rollout_batch_timeout (s)")
    parser.add_argument("--store", default="memory://", help="store URL (a sqlite:/// URL makes the run resumable)")
    parser.add_argument("--out", type=Path, default=Path("apo-example-output"))
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Optimize, evaluate, write the summary and the plot; returns the summary."""
    args.out.mkdir(parents=True, exist_ok=True)
    train, val, test = load_split("train"), load_split("val"), load_split("test")
    with ExitStack() as stack:
        agent_endpoint, optimizer_endpoint = endpoints(stack, args.optimizer)
        from openai import AsyncOpenAI

        llm = agl.LLM(endpoint=agent_endpoint.base_url, model=agent_endpoint.models[0], api_key=agent_endpoint.api_key)
        seed_prompt = agl.PromptTemplate(template=SEED_PROMPT, engine="f-string")
        gradient_model = optimizer_endpoint.models[0]
        edit_model = optimizer_endpoint.models[-1]
        algorithm = agl.APO(
            AsyncOpenAI(base_url=optimizer_endpoint.base_url, api_key=optimizer_endpoint.api_key),
            gradient_model=gradient_model,
            apply_edit_model=edit_model,
            beam_width=args.beam_width,
            branch_factor=args.branch_factor,
            beam_rounds=args.rounds,
            gradient_batch_size=args.gradient_batch_size,
            val_batch_size=args.val_batch_size,
            rollout_batch_timeout=args.rollout_timeout,
            seed=args.seed,
            completion_kwargs={"max_tokens": args.optimizer_max_tokens},
        )
        trainer = agl.Trainer(
            algorithm=algorithm,
            n_runners=args.runners,
            store=args.store,
            adapter=agl.TraceToMessages(),
            tracer=agl.OtelTracer(instrument=True),
            initial_resources={"prompt": seed_prompt, "llm": llm},
        )
        started = time.monotonic()
        trainer.fit(topic_agent, train, val_dataset=val)
        fit_seconds = time.monotonic() - started
        best = algorithm.get_best_prompt()
        started = time.monotonic()
        test_seed = asyncio.run(accuracy(llm, seed_prompt, test, args.runners * 2))
        test_best = asyncio.run(accuracy(llm, best, test, args.runners * 2))
        test_seconds = time.monotonic() - started
    history = algorithm.get_history()
    summary: dict[str, Any] = {
        "agent": {"endpoint": agent_endpoint.base_url, "model": llm.model},
        "optimizer": {
            "endpoint": optimizer_endpoint.base_url,
            "gradient_model": gradient_model,
            "apply_edit_model": edit_model,
        },
        "config": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
        "dataset": {"train": len(train), "val": len(val), "test": len(test)},
        "seed_prompt": SEED_PROMPT,
        "best_prompt": best.template,
        "best_version": algorithm.best_version,
        "val_seed": history[0].score,
        "val_best": algorithm.best_score,
        "test_seed": test_seed,
        "test_best": test_best,
        "rollouts_enqueued": algorithm.stats.rollouts_enqueued,
        "rollouts_reused": algorithm.stats.rollouts_reused,
        "stats": algorithm.stats.to_json(),
        "fit_seconds": round(fit_seconds, 1),
        "test_seconds": round(test_seconds, 1),
        "history": [entry.to_json() for entry in history],
        "edit_log": algorithm.get_edit_log(),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    plot(summary, args.out / "scores.png")
    return summary


def plot(summary: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed; no plot written")
        return
    history = summary["history"]
    figure, axes = plt.subplots(figsize=(6, 3.5))
    candidates = [(entry["round"], entry["score"]) for entry in history if entry["kind"] == "candidate"]
    leaders = [(entry["round"], entry["score"]) for entry in history if entry["kind"] in ("seed", "leader")]
    if candidates:
        axes.scatter([r for r, _ in candidates], [s or 0.0 for _, s in candidates], alpha=0.5, label="candidates")
    if leaders:
        axes.plot([r for r, _ in leaders], [s or 0.0 for _, s in leaders], marker="o", label="leader")
    axes.set_xlabel("round")
    axes.set_ylabel("validation accuracy")
    axes.set_ylim(-0.05, 1.05)
    axes.legend()
    axes.set_title(f"APO on the topic agent ({summary['agent']['model']})")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: Optional[list[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    summary = run(parse_args(argv))
    print(json.dumps({key: summary[key] for key in ("val_seed", "val_best", "test_seed", "test_best")}, indent=2))
    print(f"best prompt ({summary['best_version']}):\n{summary['best_prompt']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
