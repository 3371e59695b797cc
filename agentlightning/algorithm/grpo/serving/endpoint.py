"""The policy as the agents reach it: its serving behind the LLM proxy (`Endpoint`), so a run holds the serving, the
proxy in front of it and the agents routed to it as one, and hands none of them around separately (routing.py)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Optional

from .routing import agent_resources, flush_proxy, route_to_newest, start_proxy

if TYPE_CHECKING:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store.base import LightningStore

    from .base import Serving

__all__ = ["Endpoint"]


class Endpoint:
    """`serving` behind the proxy (from `start_proxy` on), with routes for the served model and each of `agents`."""

    def __init__(self, serving: Serving, agents: Optional[Collection[str]]) -> None:
        self.serving = serving
        self.agents = agents
        self.proxy: Optional[LLMProxy] = None
        self.own_proxy = False  # the run started the proxy (and stops it with the serving)

    def start_proxy(self, given: Optional[LLMProxy], store: LightningStore, options: Mapping[str, Any]) -> LLMProxy:
        """Route the Trainer's proxy (`given`) to the serving, or start one with `options` (`routing.start_proxy`)."""
        self.proxy, self.own_proxy = start_proxy(given, store, self.serving, self.agents, options)
        return self.proxy

    async def publish_resources(
        self,
        store: LightningStore,
        resources_id: str,
        resource_name: str,
        temperature: float,
        initial: Optional[Mapping[str, Any]],
    ) -> str:
        """Publish the resources the agents read (`routing.agent_resources`) as `resources_id`; return it."""
        assert self.proxy is not None
        resources = agent_resources(self.proxy, self.serving, resource_name, self.agents, temperature, initial)
        await store.update_resources(resources_id, resources)
        return resources_id

    def route_to_newest(self) -> None:
        """After a publish: the proxy's routes to the newest weights (`routing.route_to_newest`)."""
        route_to_newest(self.proxy, self.serving, self.agents)

    async def flush(self) -> None:
        """Wait until the proxy wrote every call it relayed (`routing.flush_proxy`)."""
        await flush_proxy(self.proxy)

    def stop(self) -> None:
        """Stop the proxy when the run started it, then the serving."""
        if self.own_proxy and self.proxy is not None and self.proxy.is_running():
            self.proxy.stop()
        self.serving.stop()
