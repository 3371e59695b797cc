"""Functional agents: signatures, resource injection by parameter name, ProxyLLM stripping, pickling."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from agentlightning.litagent import FunctionalLitAgent, LitAgent, llm_rollout, prompt_rollout, rollout
from agentlightning.types import LLM, Attempt, AttemptedRollout, PromptTemplate, ProxyLLM, Rollout


def _attempted() -> AttemptedRollout:
    return AttemptedRollout(
        rollout_id="ro-1",
        input={},
        start_time=0.0,
        attempt=Attempt(rollout_id="ro-1", attempt_id="at-1", sequence_id=1, start_time=0.0),
    )


@rollout
def llm_agent(task: Any, llm: LLM, rollout: Rollout) -> Any:
    """Doc of llm_agent."""
    return (task, llm, rollout)


@rollout
async def async_prompt_agent(task: Any, prompt_template: PromptTemplate) -> Any:
    return prompt_template.format(x=task)


def test_the_decorated_function_stays_callable_with_its_metadata() -> None:
    assert isinstance(llm_agent, FunctionalLitAgent) and isinstance(llm_agent, LitAgent)
    assert llm_agent.__name__ == "llm_agent"
    assert llm_agent.__doc__ == "Doc of llm_agent."
    assert llm_agent(1, "llm", "r") == (1, "llm", "r")


def test_the_llm_is_injected_by_parameter_name_with_the_rollout() -> None:
    llm = LLM(endpoint="http://x/v1", model="m")
    rollout_obj = _attempted()
    task, injected, received = llm_agent.rollout(
        7, {"prompt": PromptTemplate(template="t", engine="f-string"), "main": llm}, rollout_obj
    )
    assert (task, injected, received) == (7, llm, rollout_obj)


async def test_async_agents_inject_the_prompt_template() -> None:
    template = PromptTemplate(template="Solve {x}", engine="f-string")
    assert async_prompt_agent.is_async()
    assert await async_prompt_agent.rollout_async(2, {"p": template}, _attempted()) == "Solve 2"


def test_a_proxy_llm_is_bound_to_the_attempt() -> None:
    proxy = ProxyLLM(endpoint="http://proxy:1/v1", model="m")
    _, injected, _ = llm_agent.rollout(1, {"main": proxy}, _attempted())
    assert type(injected) is LLM
    assert injected.endpoint == "http://proxy:1/rollout/ro-1/attempt/at-1/v1"


def test_strip_proxy_false_passes_the_proxy_llm_through() -> None:
    @llm_rollout(strip_proxy=False)
    def agent(task: Any, llm: Any) -> Any:
        return llm

    proxy = ProxyLLM(endpoint="http://proxy:1/v1", model="m")
    assert agent.rollout(1, {"main": proxy}, _attempted()) is proxy


def test_a_rollout_without_any_resources_says_nothing_was_published_and_who_publishes() -> None:
    with pytest.raises(ValueError, match="needs a LLM resource") as raised:
        llm_agent.rollout(1, {}, _attempted())
    message = str(raised.value)
    assert "nothing was published to the store" in message
    assert "an @agl.algo function must publish them itself" in message
    assert "e.g. initial_resources=" not in message  # passing them to the Trainer alone does not publish them


def test_resources_without_the_needed_kind_are_named() -> None:
    prompt = PromptTemplate(template="t", engine="f-string")
    with pytest.raises(ValueError, match=r"resources have none \(names: \['prompt'\]\); add a LLM"):
        llm_agent.rollout(1, {"prompt": prompt}, _attempted())


def test_several_llms_use_the_first_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    first, second = LLM(endpoint="http://a", model="a"), LLM(endpoint="http://b", model="b")
    _, injected, _ = llm_agent.rollout(1, {"a": first, "b": second}, _attempted())
    assert injected is first
    assert "several LLM resources" in caplog.text


@pytest.mark.parametrize(
    "signature",
    [
        "def f(llm, task): pass",
        "def f(task, other): pass",
        "def f(task, rollout, other): pass",
    ],
)
def test_unsupported_signatures_are_rejected(signature: str) -> None:
    namespace: dict[str, Any] = {}
    exec(signature, namespace)
    with pytest.raises(NotImplementedError, match="task, llm"):
        rollout(namespace["f"])


def test_an_agent_that_takes_no_resource_runs_with_its_task_alone() -> None:
    @rollout
    def agent(task: Any) -> float:
        return float(task)

    assert agent.rollout(3, {}, _attempted()) == 3.0
    assert agent.rollout(4, {"main": LLM(endpoint="http://x/v1", model="m")}, _attempted()) == 4.0


async def test_an_agent_that_takes_no_resource_may_take_its_rollout() -> None:
    @rollout
    async def agent(task: Any, rollout: Rollout) -> str:
        return f"{task}:{rollout.rollout_id}"

    assert await agent.rollout_async("t", {}, _attempted()) == "t:ro-1"


def test_the_specific_decorators_validate_their_resource_parameter() -> None:
    with pytest.raises(ValueError, match="'llm'"):
        llm_rollout(lambda task, prompt_template: None)
    with pytest.raises(ValueError, match="'prompt_template'"):
        prompt_rollout(lambda task, llm: None)
    with pytest.raises(ValueError, match="first parameter"):
        llm_rollout(lambda llm, task: None)


def test_a_decorated_module_function_pickles_by_reference() -> None:
    copy = pickle.loads(pickle.dumps(llm_agent))
    assert copy is llm_agent


def test_sync_and_async_entry_points_are_not_mixed() -> None:
    with pytest.raises(RuntimeError, match="is async"):
        async_prompt_agent.rollout(1, {}, _attempted())
