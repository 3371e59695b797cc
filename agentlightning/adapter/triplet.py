"""Trace-to-triplet adapters: turn the spans of a rollout into (prompt, response, reward) training triplets."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional, Union

from pydantic import BaseModel, ConfigDict

from agentlightning.types import Span, Triplet

from .base import TraceAdapter
from .diagnostics import TrajectoryDiagnosis, diagnose_trajectory
from .trace_tree import LLM_CALL_MATCH, RewardMatchPolicy, TraceTree

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "RewardMatchPolicy",
    "TraceToTripletBase",
    "TraceTree",
    "TracerTraceToTriplet",
    "Transition",
]

logger = logging.getLogger(__name__)


class Transition(BaseModel):
    """A token-level step: state (prompt ids), action (response ids), the agent that acted and its reward."""

    model_config = ConfigDict(defer_build=True)

    state: list[int]
    action: list[int]
    response_id: Optional[str]
    agent_name: str
    reward: Optional[float]


class TraceToTripletBase(TraceAdapter[list[Triplet]]):
    """Marker base of adapters that produce triplets (what RL and SFT algorithms accept)."""

    last_diagnosis: Optional[TrajectoryDiagnosis] = None

    def _training_calls(self, source: list[Span], /) -> list[tuple[Optional[Span], Triplet]]:
        """`adapt`'s triplets, each with the span of its call (None: unknown), for `adapter.rewards`: training
        attributes step rewards to calls by their spans. An adapter of its own gives no spans (its triplets' rewards
        are its own rule), so training puts only the outcome on its final call."""
        return [(None, triplet) for triplet in self.adapt(source)]


def _as_spans(source: Sequence[Union[Span, ReadableSpan]]) -> list[Span]:
    spans: list[Span] = []
    for index, item in enumerate(source):
        if isinstance(item, Span):
            spans.append(item)
        else:
            from agentlightning.tracer.convert import span_from_readable

            spans.append(span_from_readable(item, "dummy", "dummy", index + 1))
    return spans


class TracerTraceToTriplet(TraceToTripletBase):
    """Triplets from spans recorded by a tracer (client-side instrumentation).

    Args:
        repair_hierarchy: move LLM spans recorded at the root under their enclosing span (see TraceTree).
        llm_call_match: regex on span names identifying LLM calls (default: chat completions and the Responses
            API, `openai.chat.completion` and `openai.responses`).
        agent_match: regex on agent names; only LLM calls made inside a matching agent become triplets
            (selective optimization of some agents of a multi-agent system). None keeps every call.
        exclude_llm_call_in_reward: ignore LLM calls made inside a reward span (e.g. an LLM judge).
        reward_match: how rewards are assigned to calls (see RewardMatchPolicy).
    """

    def __init__(
        self,
        repair_hierarchy: bool = True,
        llm_call_match: str = LLM_CALL_MATCH,
        agent_match: Optional[str] = None,
        exclude_llm_call_in_reward: bool = True,
        reward_match: Union[RewardMatchPolicy, str] = RewardMatchPolicy.FIRST_OCCURRENCE,
        _skip_empty_token_spans: bool = False,
    ) -> None:
        self.repair_hierarchy = repair_hierarchy
        self.llm_call_match = llm_call_match
        self.agent_match = agent_match
        self.exclude_llm_call_in_reward = exclude_llm_call_in_reward
        self.reward_match = RewardMatchPolicy(reward_match)
        self._skip_empty_token_spans = _skip_empty_token_spans
        self.last_diagnosis = None

    def _tree(self, spans: list[Span]) -> TraceTree:
        tree = TraceTree.from_spans(spans)
        if self.repair_hierarchy:
            tree.repair_hierarchy()
        return tree

    def adapt(self, source: Sequence[Union[Span, ReadableSpan]], /) -> list[Triplet]:  # type: ignore[override]
        """The triplets of `source`; an empty result is explained by a warning (see `last_diagnosis`)."""
        return [triplet for _, triplet in self._calls(source)]

    def _training_calls(self, source: list[Span], /) -> list[tuple[Optional[Span], Triplet]]:
        if type(self).adapt is not TracerTraceToTriplet.adapt:  # a subclass making triplets its own way
            return super()._training_calls(source)
        return list(self._calls(source))

    def _calls(self, source: Sequence[Union[Span, ReadableSpan]]) -> list[tuple[Span, Triplet]]:
        spans = _as_spans(source)
        name = type(self).__name__
        if not spans:
            self.last_diagnosis = diagnose_trajectory(spans, [], llm_call_match=self.llm_call_match, adapter=name)
            return []
        tree = self._tree(spans)
        calls = tree._call_triplets(  # pyright: ignore[reportPrivateUsage]
            self.llm_call_match,
            self.agent_match,
            self.exclude_llm_call_in_reward,
            True,
            self.reward_match,
            self._skip_empty_token_spans,
        )
        triplets = [triplet for _, triplet in calls]
        nodes = tree.traverse()
        selected = len(triplets)
        if not triplets:  # count the calls the filters selected, to tell "no such agent" from "no token ids"
            selected = len(
                tree.find_llm_calls(
                    llm_call_match=self.llm_call_match,
                    agent_match=self.agent_match,
                    within_matching_subtree="*" if self.agent_match is None else None,
                    within_reward=False if self.exclude_llm_call_in_reward else None,
                    within_llm_call=False,
                    existing_llm_call_response_ids=set(),
                )
            )
        self.last_diagnosis = diagnose_trajectory(
            spans,
            triplets,
            llm_call_match=self.llm_call_match,
            agent_match=self.agent_match,
            agent_names=[agent for agent in (node.agent_name() for node in nodes) if agent],
            selected_llm_calls=selected,
            reward_spans=sum(1 for node in nodes if node.is_reward_span()),
            adapter=name,
        )
        return calls

    def visualize(
        self,
        source: Sequence[Union[Span, ReadableSpan]],
        /,
        filename: str = "trace_tree",
        interested_span_match: Optional[str] = None,
    ) -> TraceTree:
        """Render the (repaired) tree of `source` to `<filename>.png` and return it."""
        tree = self._tree(_as_spans(source))
        tree.visualize(filename, interested_span_match=interested_span_match)
        return tree
