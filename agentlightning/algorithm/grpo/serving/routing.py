"""The LLM proxy in front of GRPO's serving: which upstream model each name the agents call goes to.

Entries: the served model's name goes to the served model (with vLLM and one policy: its newest adapter); with several
agents, each agent's calls go to its own adapter, by the agent's name (the model of its `<agent>_llm` resource) and by
the served model's name with the header `x-agl-agent: <agent>`. After every publish the routes are replaced in place
(`route_to_newest`): the proxy is not restarted, and requests already relayed finish where they were routed. What the
agents read is published as resources (`publish_resources`): the shared `LLM` plus one per agent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Optional

from ..rollouts.agents import agent_resource_name

if TYPE_CHECKING:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store.base import LightningStore

    from .base import Serving

__all__ = ["agent_upstream", "flush_proxy", "model_entries", "proxy_entry", "route_to_newest", "start_proxy"]

logger = logging.getLogger("agentlightning.algorithm.grpo.grpo")


def proxy_entry(serving: Serving) -> dict[str, Any]:
    """The route for the served model's name: to the served model, or the newest adapter of it (vLLM, one policy)."""
    upstream = getattr(serving, "upstream_model", None) or serving.model_name
    return {
        "model_name": serving.model_name,
        "litellm_params": {"model": f"hosted_vllm/{upstream}", "api_base": serving.endpoint},
    }


def agent_upstream(serving: Serving, agent: str) -> str:
    """The upstream model of agent `agent`'s calls: the serving's newest adapter of that agent when it names one
    (vLLM: `<agent>@step-N`, the base model before the first publish), else the adapter named after the agent (the
    in-process engine serves each agent's adapter under the agent's name)."""
    upstream_of = getattr(serving, "agent_upstream", None)
    return str(upstream_of(agent)) if callable(upstream_of) else agent


def model_entries(serving: Serving, agents: Optional[Iterable[str]]) -> list[Any]:
    """The proxy's entries: the served model (or its newest adapter), and each agent's adapter by its own name and by
    the served model's name with the header `x-agl-agent`."""
    base = serving.model_name
    agents = list(agents or ())
    if base in agents:
        raise ValueError(
            f"The agent {base!r} has the name of the served model, so the proxy cannot tell its calls from the base "
            f"model's: give its adapter another name (agent_match={{'<adapter name>': '<pattern>'}})"
        )
    entries: list[Any] = [proxy_entry(serving)]
    for agent in agents:
        params = {"model": f"hosted_vllm/{agent_upstream(serving, agent)}", "api_base": serving.endpoint}
        entries.append({"model_name": agent, "litellm_params": dict(params)})
        entries.append({"model_name": base, "agent": agent, "litellm_params": dict(params)})
    return entries


def _replaced(current: Iterable[Mapping[str, Any]], entries: list[Any]) -> list[Any]:
    """`current` without the entries of the names `entries` serve, then `entries` (other models stay routed)."""
    names = {entry["model_name"] for entry in entries}
    return [*(m for m in current if m.get("model_name") not in names), *entries]


def route_to_newest(proxy: Optional[LLMProxy], serving: Serving, agents: Optional[Iterable[str]]) -> None:
    """After a publish that loaded new weights under new upstream names (vLLM adapters), route the names to them in
    place; requests already relayed finish where they were routed. Nothing changes when the routes are current."""
    if proxy is None:
        return
    entries = model_entries(serving, agents)
    if all(entry in proxy.model_list for entry in entries):
        return
    proxy.update_model_list(_replaced(proxy.model_list, entries), restart=False)


def start_proxy(
    given: Optional[LLMProxy],
    store: LightningStore,
    serving: Serving,
    agents: Optional[Iterable[str]],
    options: Mapping[str, Any],
) -> tuple[LLMProxy, bool]:
    """The running proxy routing to `serving`: the Trainer's (`given`, its other models kept) or a new one built with
    `options`; and whether it is GRPO's own (stopped with the run)."""
    from agentlightning.llm_proxy import LLMProxy

    entries = model_entries(serving, agents)
    own = given is None
    if given is None:
        proxy = LLMProxy(model_list=entries, store=store, **options)
    elif options:
        raise ValueError(
            "GRPO got proxy= options and the Trainer an llm_proxy: configure one of them (the Trainer's is used "
            "as it is)"
        )
    else:
        proxy = given
        proxy.update_model_list(_replaced(proxy.model_list, entries))
    if proxy.get_store() is None:
        proxy.set_store(store)
    proxy.request_logprobs_on_every_call()  # the sampler's log-probs, for the sampler/trainer gap (sampler_gap.py)
    if not proxy.is_running():
        proxy.start()
    return proxy, own


async def flush_proxy(proxy: Optional[LLMProxy]) -> None:
    """Wait until the proxy has written every call it relayed: a rollout can finish before the proxy's span of its
    last call reaches the store, and reading its spans then would find the call without its token ids."""
    if proxy is None:
        return
    try:
        await proxy.aflush()
    except Exception as exc:
        logger.warning("The LLM proxy could not flush its spans: %r", exc)


def agent_resources(
    proxy: LLMProxy,
    serving: Serving,
    resource_name: str,
    agents: Optional[Iterable[str]],
    temperature: float,
    initial: Optional[Mapping[str, Any]],
) -> dict[str, Any]:
    """The resources of a version: the trainer's initial ones (a prompt template, another model), the served model as
    `resource_name`, and each agent's adapter as `<agent>_llm`, all sampling at `temperature`."""
    sampling = {"temperature": temperature}
    resources = {
        **(initial or {}),
        resource_name: proxy.as_resource(model=serving.model_name, sampling_parameters=sampling),
    }
    for agent in agents or ():
        resources[agent_resource_name(agent)] = proxy.as_resource(model=agent, sampling_parameters=dict(sampling))
    return resources
