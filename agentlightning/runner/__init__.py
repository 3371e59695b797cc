"""Runners: claim rollouts from a store and run an agent on them (`LitAgentRunner`)."""

from __future__ import annotations

from .agent import LitAgentRunner
from .base import Runner
from .errors import StoreUnreachableError

__all__ = ["LitAgentRunner", "Runner", "StoreUnreachableError"]
