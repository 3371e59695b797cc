"""CommandAgent: a program in any language as an agent, one process per rollout: what it is given (the rollout's
model URL, the task), how its reward is read, and how its failures end the rollout."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentlightning.litagent.command import CommandAgent, CommandFailedError, CommandOutput, reward_from_stdout
from agentlightning.types import LLM, Attempt, AttemptedRollout, ProxyLLM

TASK = {"question": "capital of France?", "answer": "Paris"}


def _attempted() -> AttemptedRollout:
    return AttemptedRollout(
        rollout_id="ro-1",
        input=TASK,
        start_time=0.0,
        mode="train",
        attempt=Attempt(rollout_id="ro-1", attempt_id="at-1", sequence_id=1, start_time=0.0),
    )


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "agent.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


PROXY = {
    "main_llm": ProxyLLM(
        endpoint="http://127.0.0.1:9/v1", model="policy", api_key="k", sampling_parameters={"temperature": 0.7}
    )
}


async def test_the_program_gets_the_rollouts_proxy_url_model_and_task(tmp_path: Path) -> None:
    command = _script(
        tmp_path,
        """
        import json, os, sys
        keys = ["OPENAI_BASE_URL", "AGL_LLM_BASE_URL", "OPENAI_API_KEY", "AGL_LLM_MODEL", "AGL_LLM_SAMPLING",
                "AGL_TASK", "AGL_ROLLOUT_ID", "AGL_ATTEMPT_ID", "AGL_MODE"]
        seen = {key: os.environ.get(key) for key in keys}
        seen["stdin"] = sys.stdin.read()
        print(json.dumps(seen))
        """,
    )
    output = await CommandAgent(command).run_command(TASK, CommandAgent(command).environment(TASK, PROXY, _attempted()))
    seen = json.loads(output.stdout)
    assert seen["OPENAI_BASE_URL"] == seen["AGL_LLM_BASE_URL"] == "http://127.0.0.1:9/rollout/ro-1/attempt/at-1/v1"
    assert (seen["OPENAI_API_KEY"], seen["AGL_LLM_MODEL"]) == ("k", "policy")
    assert json.loads(seen["AGL_LLM_SAMPLING"]) == {"temperature": 0.7}
    assert json.loads(seen["AGL_TASK"]) == TASK and json.loads(seen["stdin"]) == TASK
    assert (seen["AGL_ROLLOUT_ID"], seen["AGL_ATTEMPT_ID"], seen["AGL_MODE"]) == ("ro-1", "at-1", "train")


async def test_the_reward_is_the_last_json_line_with_a_reward_on_standard_output(tmp_path: Path) -> None:
    command = _script(
        tmp_path,
        """
        print("thinking...")
        print('{"reward": 0.25}')
        print('{"note": "not a reward"}')
        print("done")
        """,
    )
    assert await CommandAgent(command).rollout_async(TASK, PROXY, _attempted()) == 0.25


async def test_a_reward_function_scores_the_task_and_the_programs_output(tmp_path: Path) -> None:
    command = _script(tmp_path, "print('The capital is Paris')\n")

    def score(task: Any, output: CommandOutput) -> float:
        return float(task["answer"] in output.stdout)

    assert await CommandAgent(command, reward=score).rollout_async(TASK, PROXY, _attempted()) == 1.0


async def test_a_program_that_prints_no_reward_yields_none(tmp_path: Path) -> None:
    command = _script(tmp_path, "print('no reward here')\n")
    assert await CommandAgent(command).rollout_async(TASK, PROXY, _attempted()) is None


async def test_a_non_zero_exit_fails_the_rollout_with_the_end_of_standard_error(tmp_path: Path) -> None:
    command = _script(tmp_path, "import sys\nsys.stderr.write('tool call not valid JSON')\nsys.exit(3)\n")
    with pytest.raises(CommandFailedError, match=r"exited with status 3: tool call not valid JSON"):
        await CommandAgent(command).rollout_async(TASK, PROXY, _attempted())


async def test_a_program_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    command = _script(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(marker)!r}, "w").write(str(child.pid))
        time.sleep(60)
        """,
    )
    started = time.monotonic()
    with pytest.raises(CommandFailedError, match=r"ran past its timeout of 1\.5 s"):
        await CommandAgent(command, timeout=1.5).rollout_async(TASK, PROXY, _attempted())
    assert time.monotonic() - started < 30
    child = int(marker.read_text())
    for _ in range(50):  # the whole process group was killed: the grandchild too
        try:
            import os

            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the program's child survived the timeout")


async def test_a_program_that_cannot_start_fails_the_rollout_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CommandFailedError, match="cannot start /no/such/agent"):
        await CommandAgent(["/no/such/agent"]).rollout_async(TASK, PROXY, _attempted())


def test_a_printed_reward_that_is_not_a_finite_number_is_refused() -> None:
    with pytest.raises(ValueError, match="not a finite number: 'high'"):
        reward_from_stdout('{"reward": "high"}')
    with pytest.raises(ValueError, match="not a finite number"):
        reward_from_stdout('{"reward": NaN}')


def test_an_empty_command_and_a_non_positive_timeout_are_refused() -> None:
    with pytest.raises(ValueError, match="needs a command"):
        CommandAgent([])
    with pytest.raises(ValueError, match="timeout must be positive"):
        CommandAgent("node agent.mjs", timeout=0)


def test_a_named_llm_resource_that_is_not_an_llm_is_refused() -> None:
    agent = CommandAgent("node agent.mjs", llm_resource="prompt")
    with pytest.raises(ValueError, match="resource 'prompt' is not an LLM"):
        agent.environment(TASK, {"prompt": None, **PROXY}, _attempted())  # type: ignore[dict-item]


def test_a_plain_llm_is_handed_over_as_it_is() -> None:
    env = CommandAgent("x").environment(TASK, {"llm": LLM(endpoint="http://h:1/v1", model="m")}, _attempted())
    assert env["OPENAI_BASE_URL"] == "http://h:1/v1" and env["OPENAI_API_KEY"] == "agentlightning"
