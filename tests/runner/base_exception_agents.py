"""Agents that raise BaseExceptions that are not Exceptions (module level: runner processes import them)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from greenlet import GreenletExit

from agentlightning.litagent import LitAgent

MESSAGE = "raised by the agent"


class OwnBaseException(BaseException):
    """A user's own BaseException subclass."""


def make(kind: str) -> BaseException:
    """The BaseException of that kind, with MESSAGE."""
    if kind == "own":
        return OwnBaseException(MESSAGE)
    if kind == "keyboard":
        return KeyboardInterrupt(MESSAGE)
    if kind == "cancelled":
        return asyncio.CancelledError(MESSAGE)
    if kind == "greenlet":
        return GreenletExit(MESSAGE)
    if kind == "pytest_failed":
        try:
            pytest.fail(MESSAGE)
        except BaseException as exc:  # pytest's Failed (an OutcomeException, a BaseException)
            return exc
    raise ValueError(f"unknown kind {kind!r}")


class SyncRaisingAgent(LitAgent[Any]):
    """{"raise": kind} raises that BaseException; {"wait": True} signals `started` and waits for `release()`."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def rollout(self, task: Any, resources: Any, rollout: Any) -> Any:
        if "raise" in task:
            raise make(task["raise"])
        if task.get("wait"):
            self.started.set()
            self._released.wait(30)
        return task.get("reward", 1.0)


class AsyncRaisingAgent(SyncRaisingAgent):
    """The async version of SyncRaisingAgent."""

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> Any:
        if "raise" in task:
            raise make(task["raise"])
        if task.get("wait"):
            self.started.set()
            while not self._released.is_set():
                await asyncio.sleep(0.01)
        return task.get("reward", 1.0)


class BaseExceptionAgent(LitAgent[Any]):
    """Picklable: {"raise": kind} raises that BaseException, otherwise returns task["reward"]."""

    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> Any:
        if "raise" in task:
            raise make(task["raise"])
        return task.get("reward", 1.0)
