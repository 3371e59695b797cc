"""Zero-code capture of LangChain and LangGraph runs (chains, graph nodes, tools, chat models).

Uses the OpenInference LangChain instrumentor. LLM calls made by `langchain-openai` go through the OpenAI SDK, so
their token ids are recorded on the nested OpenAI span (`instrument_openai`); LangGraph node spans are named after
the node and carry `agent.name`, which `agent_match` selects on.
"""

from __future__ import annotations

from ._openinference import instrument_pair

__all__ = ["instrument_langchain", "uninstrument_langchain"]

INSTRUMENTOR = "openinference.instrumentation.langchain.LangChainInstrumentor"

instrument_langchain, uninstrument_langchain = instrument_pair(INSTRUMENTOR, "langchain")
