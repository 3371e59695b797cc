"""Zero-code capture of AutoGen AgentChat (agents, teams, tools).

Uses the OpenInference AutoGen-AgentChat instrumentor; agent spans carry the agent's name. Model calls of
`autogen-ext`'s OpenAI client go through the OpenAI SDK and are captured with their token ids by
`instrument_openai`.
"""

from __future__ import annotations

from ._openinference import instrument_pair

__all__ = ["instrument_autogen", "uninstrument_autogen"]

INSTRUMENTOR = "openinference.instrumentation.autogen_agentchat.AutogenAgentChatInstrumentor"

instrument_autogen, uninstrument_autogen = instrument_pair(INSTRUMENTOR, "autogen")
