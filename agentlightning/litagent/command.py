"""`CommandAgent`: an agent that is a program, in any language, run once per rollout.

The program gets everything through its environment (and the task also on standard input):

- `OPENAI_BASE_URL` and `AGL_LLM_BASE_URL`: the model's base URL for this rollout (through the LLM proxy it is
  `.../rollout/<id>/attempt/<id>/v1`, so every call is recorded with its token ids and tied to the rollout);
  `OPENAI_API_KEY` / `AGL_LLM_API_KEY`, `AGL_LLM_MODEL`, and `AGL_LLM_SAMPLING` (the sampling parameters as JSON).
  An OpenAI SDK in any language reads the first two by itself.
- `AGL_TASK`: the task as JSON (also written to standard input), `AGL_ROLLOUT_ID`, `AGL_ATTEMPT_ID`, `AGL_MODE`.

The reward is `reward(task, output)` when a function is given, else the `"reward"` of the last line of standard
output that is a JSON object with one (`{"reward": 1.0}`); a program that prints none yields no reward (the rollout
still succeeds). A non-zero exit status, or running past `timeout`, fails the rollout with the end of the
program's standard error: that is the agent failing on the model's output, which GRPO can score with a failure
reward. The program runs in its own process group, which is killed on a timeout or a cancelled rollout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import shlex
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from agentlightning.types import LLM, AttemptedRollout, NamedResources, ProxyLLM, Rollout

from .litagent import LitAgent

__all__ = ["CommandAgent", "CommandFailedError", "CommandOutput", "reward_from_stdout"]

logger = logging.getLogger(__name__)

_STDERR_TAIL = 2000  # characters of standard error kept in a failure's message


@dataclass(frozen=True)
class CommandOutput:
    """What one run of the program left: its exit status and both output streams (decoded as UTF-8)."""

    returncode: int
    stdout: str
    stderr: str


class CommandFailedError(RuntimeError):
    """The program exited with a non-zero status or ran past its timeout."""


def reward_from_stdout(stdout: str) -> Optional[float]:
    """The `"reward"` of the last line of `stdout` that is a JSON object holding one (None: no such line).

    Raises:
        ValueError: that reward is not a finite number.
    """
    for line in reversed(stdout.splitlines()):
        text = line.strip()
        if not (text.startswith("{") and text.endswith("}")):
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict) or "reward" not in data:
            continue
        value = data["reward"]
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"the program printed a reward that is not a finite number: {value!r}")
        return float(value)
    return None


RewardFunction = Callable[[Any, CommandOutput], Optional[float]]


class CommandAgent(LitAgent[Any]):
    """Run `command` once per rollout (see the module docstring for what it gets and how its reward is read).

    Args:
        command: the program and its arguments (a list, or a string split like a shell would, without a shell).
        reward: `reward(task, output) -> float | None` computed in Python from the task and the program's
            `CommandOutput`; None reads the reward from standard output (`reward_from_stdout`).
        llm_resource: the name of the LLM resource to hand the program (None: the first LLM of the rollout).
        env: extra environment variables (the runner's environment is inherited).
        cwd: the working directory of the program.
        timeout: seconds the program may run; then its process group is killed and the rollout fails.
    """

    def __init__(
        self,
        command: Union[str, Sequence[str]],
        *,
        reward: Optional[RewardFunction] = None,
        llm_resource: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Union[str, Path, None] = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__()
        argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
        if not argv:
            raise ValueError("CommandAgent needs a command to run")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.command = argv
        self.reward = reward
        self.llm_resource = llm_resource
        self.env = dict(env or {})
        self.cwd = Path(cwd) if cwd is not None else None
        self.timeout = float(timeout)

    def is_async(self) -> bool:
        return True

    def _llm(self, resources: NamedResources, rollout: Rollout) -> Optional[LLM]:
        if self.llm_resource is not None:
            chosen = resources.get(self.llm_resource)
            if not isinstance(chosen, LLM):
                raise ValueError(
                    f"CommandAgent: resource {self.llm_resource!r} is not an LLM (resources: {sorted(resources)})"
                )
        else:
            chosen = next((value for value in resources.values() if isinstance(value, LLM)), None)
        if isinstance(chosen, ProxyLLM) and isinstance(rollout, AttemptedRollout):
            return chosen.with_attempted_rollout(rollout)
        return chosen

    def environment(self, task: Any, resources: NamedResources, rollout: Rollout) -> dict[str, str]:
        """The environment the program runs with for this rollout."""
        env = {**os.environ, **self.env}
        env["AGL_TASK"] = json.dumps(task)
        env["AGL_ROLLOUT_ID"] = rollout.rollout_id
        env["AGL_MODE"] = str(rollout.mode or "")
        if isinstance(rollout, AttemptedRollout):
            env["AGL_ATTEMPT_ID"] = rollout.attempt.attempt_id
        llm = self._llm(resources, rollout)
        if llm is not None:
            base_url = llm.get_base_url()
            key = llm.api_key or "agentlightning"
            env.update(
                OPENAI_BASE_URL=base_url,
                AGL_LLM_BASE_URL=base_url,
                OPENAI_API_KEY=key,
                AGL_LLM_API_KEY=key,
                AGL_LLM_MODEL=llm.model,
                AGL_LLM_SAMPLING=json.dumps(llm.sampling_parameters),
            )
        return env

    async def rollout_async(self, task: Any, resources: NamedResources, rollout: Rollout) -> Optional[float]:
        output = await self.run_command(task, self.environment(task, resources, rollout))
        if output.returncode != 0:
            raise CommandFailedError(
                f"{shlex.join(self.command)} exited with status {output.returncode}: "
                f"{output.stderr[-_STDERR_TAIL:].strip() or '(no standard error)'}"
            )
        if self.reward is not None:
            return self.reward(task, output)
        return reward_from_stdout(output.stdout)

    async def run_command(self, task: Any, env: Mapping[str, str]) -> CommandOutput:
        """Run the program once with `env`, the task as JSON on standard input; kill its process group on a
        timeout or cancellation."""
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(env),
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise CommandFailedError(f"cannot start {shlex.join(self.command)}: {exc}") from exc
        try:
            stdout, stderr = await asyncio.wait_for(
                process.communicate(json.dumps(task).encode() + b"\n"), timeout=self.timeout
            )
        except asyncio.TimeoutError:
            _kill_group(process)
            _, stderr = await process.communicate()
            raise CommandFailedError(
                f"{shlex.join(self.command)} ran past its timeout of {self.timeout:g} s and was killed: "
                f"{stderr.decode(errors='replace')[-_STDERR_TAIL:].strip() or '(no standard error)'}"
            ) from None
        except BaseException:
            _kill_group(process)
            raise
        return CommandOutput(process.returncode or 0, stdout.decode(errors="replace"), stderr.decode(errors="replace"))


def _kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            process.kill()
        except ProcessLookupError:
            pass
