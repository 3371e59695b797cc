"""Zero-code capture of AutoGen AgentChat (agents, teams, tools).

Uses the OpenInference AutoGen-AgentChat instrumentor; agent spans carry the agent's name. Model calls of
`autogen-ext`'s OpenAI client go through the OpenAI SDK and are captured with their token ids by
`instrument_openai`.
"""

from __future__ import annotations

from ._openinference import activate, deactivate

__all__ = ["instrument_autogen", "uninstrument_autogen"]

INSTRUMENTOR = "openinference.instrumentation.autogen_agentchat.AutogenAgentChatInstrumentor"


def instrument_autogen() -> bool:
    """Trace AutoGen AgentChat runs. Raises ImportError when the instrumentor is not installed."""
    return activate(INSTRUMENTOR, "autogen")


def uninstrument_autogen() -> None:
    deactivate(INSTRUMENTOR)
