"""Agents used by the runner tests (module level: some tests send them to other processes)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import agentlightning as agl
from agentlightning.litagent import LitAgent


class ScriptedAgent(LitAgent[Any]):
    """Does what the task says: {"reward": x}, {"raise": msg}, {"exit": code}, {"sleep": s}, {"print": n},
    {"return": value}, {"emit": x} (emit_reward then return None)."""

    def rollout(self, task: Any, resources: Any, rollout: Any) -> Any:
        if "sleep" in task:
            time.sleep(task["sleep"])
        if "spin" in task:
            deadline = time.monotonic() + task["spin"]
            while time.monotonic() < deadline:
                pass
        if "raise" in task:
            raise RuntimeError(task["raise"])
        if "exit" in task:
            sys.exit(task["exit"])
        if "print" in task:
            sys.stdout.write("x" * task["print"])
        if "emit" in task:
            agl.emit_reward(task["emit"])
            return None
        if "return" in task:
            return task["return"]
        return task.get("reward", 1.0)


class AsyncScriptedAgent(LitAgent[Any]):
    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> Any:
        if "sleep" in task:
            await asyncio.sleep(task["sleep"])
        if "block" in task:
            time.sleep(task["block"])  # blocks the event loop on purpose
        if "raise" in task:
            raise RuntimeError(task["raise"])
        if "exit" in task:
            sys.exit(task["exit"])
        if "emit" in task:
            agl.emit_reward(task["emit"])
            return None
        return task.get("reward", 1.0)


class PidAgent(LitAgent[Any]):
    """Reports which process ran it (as the reward), after sleeping `task["sleep"]` seconds."""

    def rollout(self, task: Any, resources: Any, rollout: Any) -> Any:
        time.sleep(task.get("sleep", 0.0))
        return float(os.getpid())
