"""A job like the main one (examples/arithmetic_rl/train.py): this script imports the GRPO algorithm at module level,
so each spawned runner process imports it again as `__mp_main__`; its agent writes the modules loaded in the runner
process to a file.

    python tests/footprint/runner_modules_job.py OUT_FILE
"""

from __future__ import annotations

import json
import sys
from typing import Any

import agentlightning as agl
from agentlightning.algorithm.grpo import GRPO  # noqa: F401  (imported as the main job's script does)
from agentlightning.types import EnqueueRolloutRequest


class ModulesAgent(agl.LitAgent[Any]):
    """Writes the names of the modules loaded in its process to `task["out"]`."""

    def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
        with open(task["out"], "w") as out:
            json.dump(sorted(sys.modules), out)
        return 1.0


class EnqueueOne(agl.Algorithm):
    """Enqueues the one task and waits for it."""

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        rollouts = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=train_dataset[0], mode="train")])
        finished = await store.wait_for_rollouts(rollout_ids=[rollouts[0].rollout_id], timeout=120)
        if not finished or finished[0].status != "succeeded":
            raise SystemExit(f"the rollout did not succeed: {finished}")


if __name__ == "__main__":
    trainer = agl.Trainer(algorithm=EnqueueOne(), n_runners=1, progress="off")
    trainer.fit(ModulesAgent(), [{"out": sys.argv[1]}])
