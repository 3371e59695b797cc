"""Algorithms: the learning side of a run (what to enqueue, how to learn from the spans, what to publish).

`APO` is a factory that imports the prompt optimizer (and the OpenAI SDK it needs) on first use, so importing
this package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Algorithm
from .decorator import FunctionalAlgorithm, algo
from .fast import Baseline, FastAlgorithm
from .utils import batch_iter_over_dataset, with_llm_proxy, with_store

if TYPE_CHECKING:
    from .apo import APO as _APO

__all__ = [
    "APO",
    "Algorithm",
    "Baseline",
    "FastAlgorithm",
    "FunctionalAlgorithm",
    "algo",
    "batch_iter_over_dataset",
    "with_llm_proxy",
    "with_store",
]


def APO(*args: Any, **kwargs: Any) -> _APO[Any]:
    """Build an `agentlightning.algorithm.apo.APO` prompt optimizer (see its documentation for the arguments)."""
    from .apo import APO as _APOClass

    return _APOClass(*args, **kwargs)
