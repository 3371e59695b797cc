"""Zero-code capture of the OpenAI Agents SDK (agents, generations, tools, handoffs, guardrails).

Uses the OpenInference OpenAI Agents instrumentor, registered as the SDK's only trace processor: the SDK's default
exporter (which uploads traces to OpenAI) is replaced, so nothing leaves the machine. Agent spans carry
`agent.name`. The model calls themselves are captured on the OpenAI SDK level (`instrument_openai`).
"""

from __future__ import annotations

from ._openinference import instrument_pair

__all__ = ["instrument_openai_agents", "uninstrument_openai_agents"]

INSTRUMENTOR = "openinference.instrumentation.openai_agents.OpenAIAgentsInstrumentor"

instrument_openai_agents, uninstrument_openai_agents = instrument_pair(INSTRUMENTOR, "openai-agents")
