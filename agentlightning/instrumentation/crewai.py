"""Zero-code capture of CrewAI crews (crews, agents, tasks, tools).

Uses the OpenInference CrewAI instrumentor. CrewAI's own anonymous telemetry is independent of it; set
`CREWAI_DISABLE_TELEMETRY=true` to keep CrewAI from contacting its servers.
"""

from __future__ import annotations

from ._openinference import instrument_pair

__all__ = ["instrument_crewai", "uninstrument_crewai"]

INSTRUMENTOR = "openinference.instrumentation.crewai.CrewAIInstrumentor"

instrument_crewai, uninstrument_crewai = instrument_pair(INSTRUMENTOR, "crewai")
