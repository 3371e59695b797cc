"""Algorithms: the learning side of a run (what to enqueue, how to learn from the spans, what to publish).

`APO`, `GRPO` and `VERL` are factories that import their implementations (the OpenAI SDK, torch/transformers, verl)
on first use, so importing this package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Algorithm
from .decorator import FunctionalAlgorithm, algo
from .errors import NoLLMCallsError
from .fast import Baseline, FastAlgorithm
from .utils import batch_iter_over_dataset, with_llm_proxy, with_store

if TYPE_CHECKING:
    from .apo import APO as _APO
    from .grpo import GRPO as _GRPO
    from .verl import VERL as _VERL

__all__ = [
    "APO",
    "GRPO",
    "VERL",
    "Algorithm",
    "Baseline",
    "FastAlgorithm",
    "FunctionalAlgorithm",
    "NoLLMCallsError",
    "algo",
    "batch_iter_over_dataset",
    "with_llm_proxy",
    "with_store",
]


def APO(*args: Any, **kwargs: Any) -> _APO[Any]:
    """Build an `agentlightning.algorithm.apo.APO` prompt optimizer (see its documentation for the arguments)."""
    from .apo import APO as _APOClass

    return _APOClass(*args, **kwargs)


def GRPO(*args: Any, **kwargs: Any) -> _GRPO:
    """Build an `agentlightning.algorithm.grpo.GRPO` reinforcement learner (see its documentation for the arguments)."""
    from .grpo import GRPO as _GRPOClass

    return _GRPOClass(*args, **kwargs)


def VERL(*args: Any, **kwargs: Any) -> _VERL:
    """Build an `agentlightning.algorithm.verl.VERL` trainer (needs the `verl` extra; see its documentation)."""
    from .verl import VERL as _VERLClass

    return _VERLClass(*args, **kwargs)
