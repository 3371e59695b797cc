"""A training run to interrupt (run as a script by test_interrupt.py): cs strategy, 2 runner processes, slow tasks,
a SQLite store. Prints READY once rollouts are being worked on, and the run summary (JSON) when fit is interrupted,
before letting the KeyboardInterrupt end the script as an uncaught Ctrl-C does."""

from __future__ import annotations

import asyncio
import faulthandler
import json
import signal
import sys
from typing import Any

import agentlightning as agl
from agentlightning.algorithm.base import Algorithm
from agentlightning.types import EnqueueRolloutRequest


class SlowAgent(agl.LitAgent[Any]):
    def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
        import time

        time.sleep(task["sleep"])
        return 1.0


class Forever(Algorithm):
    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        rollouts = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=item) for item in train_dataset])
        while not await store.query_rollouts(status_in=["succeeded"]):
            await asyncio.sleep(0.05)
        print("READY", flush=True)
        await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in rollouts])


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for the stacks when the run hangs
    # Ctrl-C raises KeyboardInterrupt even when this script was started from a shell's background job, which starts
    # its commands with SIGINT ignored (and Python then leaves it ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    trainer = agl.Trainer(algorithm=Forever(), n_runners=2, store=f"sqlite:///{sys.argv[1]}", progress="off")
    try:
        trainer.fit(SlowAgent(), [{"sleep": 0.3} for _ in range(1000)])
    except KeyboardInterrupt:
        print("SUMMARY " + json.dumps(trainer.summary.to_dict() if trainer.summary else None), flush=True)
        raise
    print("FIT RETURNED", flush=True)
