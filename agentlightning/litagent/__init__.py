"""Agents as the runner sees them: the `LitAgent` base class, the functional decorators, and `CommandAgent` (a
program in any language run once per rollout)."""

from __future__ import annotations

from .command import CommandAgent
from .decorator import FunctionalLitAgent, llm_rollout, prompt_rollout, rollout
from .litagent import LitAgent, is_v0_1_rollout_api

__all__ = [
    "CommandAgent",
    "FunctionalLitAgent",
    "LitAgent",
    "is_v0_1_rollout_api",
    "llm_rollout",
    "prompt_rollout",
    "rollout",
]
