"""A plain OpenAI-SDK agent trained with 4 runner processes on a SQLite store, against the local inference server.

    python examples/plain_openai_agent.py              # the embedded SmolLM2-135M-Instruct (the `inference` extra)
    python examples/plain_openai_agent.py --tiny       # a tiny random model (seconds; what the tests run)

The agent is ordinary OpenAI SDK code; `@agl.rollout` hands it the `LLM` resource by parameter name. The algorithm
here is the smallest useful one: publish the model endpoint, enqueue every task, wait, and report the mean reward
(write your own by subclassing `agl.Algorithm`). The store is a SQLite file, so the run can be inspected afterwards
(`agl store --backend sqlite:///run.db` serves it over HTTP).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, Optional

import agentlightning as agl
from agentlightning.types import EnqueueRolloutRequest

logger = logging.getLogger("plain_openai_agent")


@agl.rollout
def agent(task: dict[str, Any], llm: agl.LLM) -> float:
    """Ask the model to repeat a word; the reward is the fraction of the word's letters found in the answer."""
    from openai import OpenAI

    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused")
    answer = client.chat.completions.create(
        model=llm.model,
        messages=[{"role": "user", "content": f"Repeat this word: {task['word']}"}],
        max_tokens=16,
        temperature=0.0,
    )
    text = (answer.choices[0].message.content or "").lower()
    word = task["word"].lower()
    return sum(1 for letter in word if letter in text) / len(word)


class Evaluate(agl.Algorithm):
    """Publish the initial resources, run every task once, report the mean reward."""

    def __init__(self) -> None:
        self.mean_reward: Optional[float] = None

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        resources = self.get_initial_resources()
        resources_id = (await store.add_resources(resources)).resources_id if resources else None
        requests = [
            EnqueueRolloutRequest(input=task, mode="train", resources_id=resources_id) for task in train_dataset
        ]
        rollouts = await store.enqueue_many_rollouts(requests)
        finished = await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in rollouts], timeout=600)
        rewards = []
        for rollout in finished:
            reward = agl.find_final_reward(await store.query_spans(rollout.rollout_id, "latest"))
            if reward is not None:
                rewards.append(reward)
        self.mean_reward = sum(rewards) / len(rewards) if rewards else None
        logger.info("%d of %d rollouts finished; mean reward %s", len(finished), len(rollouts), self.mean_reward)


def serve_model(tiny: bool) -> Any:
    """Start the local inference server (in this process) and return it."""
    from agentlightning.inference.server import InferenceServer

    if tiny:
        from agentlightning.inference.tiny import build_tiny_engine

        engine = build_tiny_engine(seed=0)
    else:
        from agentlightning.inference.engine import InferenceEngine

        engine = InferenceEngine.from_default()
    return InferenceServer(engine).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="use a tiny random model instead of SmolLM2")
    parser.add_argument("--db", default="run.db", help="SQLite file of the store (default: run.db)")
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--runners", type=int, default=4)
    args = parser.parse_args()
    agl.setup_logging("INFO")
    server = serve_model(args.tiny)
    try:
        words = ["apple", "river", "stone", "cloud", "light", "green", "table", "music"]
        train = [{"word": words[i % len(words)]} for i in range(args.tasks)]
        algorithm = Evaluate()
        trainer = agl.Trainer(
            algorithm=algorithm,
            n_runners=args.runners,
            store=f"sqlite:///{args.db}",
            initial_resources={"main_llm": agl.LLM(endpoint=server.endpoint, model=server.engine.model_name)},
        )
        trainer.fit(agent, train)
        print(f"mean reward: {algorithm.mean_reward}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
