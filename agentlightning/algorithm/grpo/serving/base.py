"""What GRPO needs of whatever serves the policy (`Serving`), its error, and how every agent's adapter is served
(`publish_adapters`): the in-process engine (`inference_server`) or vLLM (`vllm`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..learning.agent_policy import AgentPolicies
    from ..learning.policy import Policy

__all__ = ["Serving", "ServingError", "publish_adapters"]


class ServingError(RuntimeError):
    """The inference server could not be started or refused new weights; the message says which and why."""


class Serving(Protocol):
    endpoint: str
    model_name: str

    def start(self) -> None: ...

    def publish(self, policy: Policy, version: str) -> None: ...

    def stop(self) -> None: ...


def publish_adapters(serving: Any, policies: AgentPolicies, version: str) -> None:
    """Serve every agent's current adapter beside the base model: swapped in place into the in-process engine (named
    after the agent), or loaded into vLLM under a new name per version (`VllmServing.publish_agents`)."""
    publish_agents = getattr(serving, "publish_agents", None)
    if callable(publish_agents):
        publish_agents(policies, version)
        return
    engine = getattr(serving, "engine", None)
    if engine is None or not hasattr(engine, "load_adapter"):
        raise ServingError(
            f"One adapter per agent is served by the in-process inference engine or vLLM; {type(serving).__name__} "
            "cannot serve adapters"
        )
    for agent in policies.agents:
        engine.load_adapter(agent, policies.adapter_weights(agent), scale=policies.scale, version=version)
