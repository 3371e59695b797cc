"""APO: automatic prompt optimization with textual gradients (beam search over prompt templates).

Needs the `apo` extra (the OpenAI SDK): `pip install 'agentlightning[apo]'`.
"""

from __future__ import annotations

from .apo import APO
from .types import APOHistoryEntry, APOStats, RolloutResultForAPO, VersionedPromptTemplate

__all__ = ["APO", "APOHistoryEntry", "APOStats", "RolloutResultForAPO", "VersionedPromptTemplate"]
