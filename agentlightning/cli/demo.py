"""`agl demo`: a narrated walk through the LightningStore (resources, queue, attempts, spans, retries).

The demo only touches what it creates: against a store that already holds work (`--store http://...`), it claims
its own rollouts by id instead of taking the queue head, and it does not replace the store's latest resources.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Optional

from agentlightning.store import LightningStore, store_from_url
from agentlightning.types import LLM, AttemptedRollout, PromptTemplate, RolloutConfig, Span


def _say(text: str) -> None:
    print(text, flush=True)


def _span(rollout_id: str, attempt_id: str, sequence_id: int, name: str, attributes: dict) -> Span:
    now = time.time()
    return Span.from_attributes(
        attributes=attributes,
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        name=name,
        start_time=now,
        end_time=now + 0.01,
    )


async def walkthrough(store: LightningStore) -> None:
    prompt = PromptTemplate(template="Answer briefly: {question}", engine="f-string")
    existing = await store.get_latest_resources()
    foreign_queue = await store.query_rollouts(status_in=["queuing", "requeuing"], limit=1)
    shared = existing is not None or len(foreign_queue) > 0
    resources_id = None
    if existing is None:
        _say("1. The algorithm publishes resources: a prompt template and an LLM endpoint.")
        resources = await store.add_resources(
            {"prompt": prompt, "llm": LLM(endpoint="http://127.0.0.1:8000/v1", model="SmolLM2-135M-Instruct")}
        )
        resources_id = resources.resources_id
        _say(f"   -> snapshot {resources.resources_id} (version {resources.version}) is now the latest")
    else:
        _say(f"1. The store already has resources ({existing.resources_id}); the demo leaves them as they are.")

    _say("2. It enqueues three tasks; each may be retried once if an attempt fails.")
    config = RolloutConfig(max_attempts=2, retry_condition=["failed", "timeout"])
    questions = ["What is 2+2?", "Capital of France?", "Colour of the sky?"]
    rollouts = [
        await store.enqueue_rollout(
            {"question": q}, mode="train", resources_id=resources_id, config=config, metadata={"agl.demo": True}
        )
        for q in questions
    ]
    for rollout in rollouts:
        _say(f"   -> {rollout.rollout_id} {rollout.status:<9} input={rollout.input}")
    own = [rollout.rollout_id for rollout in rollouts]

    async def claim() -> Optional[AttemptedRollout]:
        if not shared:
            return await store.dequeue_rollout(worker_id="runner-0")
        # Other rollouts wait in this store: claim the demo's own by id instead of taking the queue head.
        for rollout_id in own:
            current = await store.get_rollout_by_id(rollout_id)
            if current is not None and current.status in ("queuing", "requeuing"):
                return await store.start_attempt(rollout_id, worker_id="runner-0")
        return None

    if shared:
        _say("3. A runner claims the demo's rollouts by id (the store holds other work) and runs the agent.")
    else:
        _say("3. A runner claims work from the queue and runs the agent.")
    rewards: list[float] = []
    for index in range(len(rollouts) + 1):
        claimed = await claim()
        if claimed is None:
            break
        attempt = claimed.attempt
        _say(f"   -> claimed {claimed.rollout_id} attempt #{attempt.sequence_id} ({attempt.attempt_id})")
        text = prompt.format(question=claimed.input["question"])
        await store.add_span(
            _span(
                claimed.rollout_id, attempt.attempt_id, 1, "openai.chat.completion", {"gen_ai.prompt.0.content": text}
            )
        )
        if index == 1 and attempt.sequence_id == 1:
            _say("      the agent crashed: the attempt fails and the store requeues the rollout")
            await store.update_attempt(claimed.rollout_id, attempt.attempt_id, status="failed")
            requeued = await store.get_rollout_by_id(claimed.rollout_id)
            assert requeued is not None
            _say(f"      rollout is now {requeued.status}")
            continue
        reward = 1.0 if index != 2 else 0.0
        rewards.append(reward)
        await store.add_span(
            _span(claimed.rollout_id, attempt.attempt_id, 2, "agentlightning.reward", {"reward": reward})
        )
        await store.update_attempt(claimed.rollout_id, attempt.attempt_id, status="succeeded")
        _say(f"      emitted an LLM-call span and reward {reward}; attempt succeeded")

    _say("4. The algorithm waits for the rollouts and reads their traces.")
    done = await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in rollouts], timeout=5)
    for rollout in done:
        attempts = await store.query_attempts(rollout.rollout_id)
        spans = await store.query_spans(rollout.rollout_id, "latest")
        _say(
            f"   -> {rollout.rollout_id} {rollout.status}: attempts {[a.status for a in attempts]}, "
            f"latest trace {[s.name for s in spans]}"
        )
    stats = await store.statistics()
    _say(
        f"5. Store totals: {stats.get('total_rollouts')} rollouts, {stats.get('total_attempts')} attempts, "
        f"{stats.get('total_spans')} spans, {stats.get('total_resources')} resource snapshots, "
        f"{stats.get('total_workers')} worker; mean reward {sum(rewards) / max(len(rewards), 1):.2f}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agl demo", description=__doc__)
    parser.add_argument("--store", default="memory://", help="store URL (default: memory://)")
    args = parser.parse_args(argv)
    store = store_from_url(args.store)
    _say(f"Agent Lightning store walkthrough on {args.store}\n")

    async def run() -> None:
        try:
            await walkthrough(store)
        finally:
            await store.close()

    asyncio.run(run())
    return 0
