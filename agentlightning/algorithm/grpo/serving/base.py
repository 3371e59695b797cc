"""What GRPO needs of whatever serves the policy (`Serving`), its error, how every agent's adapter is served
(`publish_adapters`): the in-process engine (`inference_server`) or vLLM (`vllm`), and what builds the policy that
is served (`PolicyFactory`: one policy, or one adapter per agent)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentlightning.inference.engine import InferenceEngine

    from ..config import GRPOConfig
    from ..learning.agent_policy import AgentPolicies
    from ..learning.policy import Policy

__all__ = ["PolicyFactory", "Serving", "ServingError", "publish_adapters"]


class ServingError(RuntimeError):
    """The inference server could not be started or refused new weights; the message says which and why."""


class Serving(Protocol):
    endpoint: str
    model_name: str

    def start(self) -> None: ...

    def publish(self, policy: Policy, version: str) -> None: ...

    def stop(self) -> None: ...


class PolicyFactory(Protocol):
    """Builds what a run trains (`trained.py`: one policy, or one LoRA adapter per agent on one base model)."""

    @property
    def adapter_count(self) -> int:
        """How many policies are served side by side (1, or one per agent)."""
        ...

    def from_pretrained(self, path: Path, config: GRPOConfig) -> Policy:
        """The policy trained from a model folder (the served model is not known to hold its weights yet)."""
        ...

    def from_engine(self, engine: InferenceEngine, config: GRPOConfig, *, default_model: bool) -> tuple[Policy, bool]:
        """The policy on the model `engine` serves (`default_model`: the embedded one), and whether the engine is
        known to serve the policy's weights."""
        ...


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
