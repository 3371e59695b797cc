"""The LLM proxy: an OpenAI-compatible gateway that records every call under its rollout, with token ids."""

from __future__ import annotations

from .models import ModelConfig
from .proxy import LLMProxy, get_active_llm_proxy, set_active_llm_proxy

__all__ = ["LLMProxy", "ModelConfig", "get_active_llm_proxy", "set_active_llm_proxy"]
