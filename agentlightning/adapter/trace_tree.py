"""`TraceTree`: the spans of one rollout as a tree, with the operations that turn it into a trajectory.

Building the tree repairs what tracing subsystems leave behind: spans whose parent is missing get a synthetic
parent (`agentlightning.virtual`), several roots get a synthetic root (`virtual-root`), and `repair_hierarchy` moves
LLM spans that were recorded as direct children of the root under the span whose time interval encloses them.
Children are kept in start-time order, so a depth-first walk visits LLM calls chronologically.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any, Optional, Union

from agentlightning.emitter.reward import get_reward_value
from agentlightning.semconv import AGL_VIRTUAL
from agentlightning.types import Span, Triplet

from .attributes import invoked_agent_name, parse_literal, token_id_list
from .messages import add_raw_content

__all__ = ["LLM_CALL_MATCH", "RewardMatchPolicy", "TraceTree"]

LLM_CALL_MATCH = r"openai\.(?:chat\.completion|responses)"
"""Span names of LLM calls by default: chat completions and Responses API calls (the OpenAI Agents SDK's default)."""

logger = logging.getLogger(__name__)

VIRTUAL_ROOT_ID = "virtual-root"
LANGGRAPH_NODE = "langgraph.node"
"""Attribute of a LangGraph node's span: the node's name (set by the LangChain instrumentation's mapping)."""
LANGGRAPH_DEFAULT_NAME = "LangGraph"
"""The name LangGraph gives a compiled graph that was not named; such a graph is not an agent."""


class RewardMatchPolicy(str, Enum):
    """How rewards are assigned to LLM calls.

    FIRST_OCCURRENCE: each reward goes to the latest LLM call that finished before the reward started and has no
    reward yet (scanning the whole trace in time order).
    FIRST_SIBLING: the same rule, but only among the reward span's siblings (children of the same parent).
    """

    FIRST_SIBLING = "first_sibling"
    FIRST_OCCURRENCE = "first_occurrence"


def _time(value: Optional[float], default: float) -> float:
    return value if value is not None else default


class TraceTree:
    """A node of the span tree: a span (`id` is its span id) and its children."""

    def __init__(self, id: str, span: Span, children: Optional[list[TraceTree]] = None) -> None:
        self.id = id
        self.span = span
        self.children: list[TraceTree] = children if children is not None else []

    # ----------------------------------------------------------------------------------------------- basics
    @property
    def start_time(self) -> Optional[float]:
        return self.span.start_time

    @property
    def end_time(self) -> Optional[float]:
        return self.span.end_time

    def find_id(self, id: str) -> Optional[TraceTree]:
        """The node with span id `id` in this subtree (depth-first), or None."""
        for node in self.traverse():
            if node.id == id:
                return node
        return None

    def add_child(self, child: TraceTree) -> None:
        self.children.append(child)

    def traverse(self) -> list[TraceTree]:
        """All nodes of this subtree in pre-order (this node first)."""
        result: list[TraceTree] = []
        stack: list[TraceTree] = [self]
        while stack:
            node = stack.pop()
            result.append(node)
            stack.extend(reversed(node.children))
        return result

    def names_tuple(self) -> tuple[str, list[Any]]:
        """`(name, [children tuples])`; a node with an agent name is shown as `name [agent]`."""
        agent = self.agent_name()
        name = self.span.name + (f" [{agent}]" if agent else "")
        return name, [child.names_tuple() for child in self.children]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "span": self.span.model_dump(), "children": [child.to_json() for child in self.children]}

    def __repr__(self) -> str:
        return f"TraceTree(id={self.id!r}, name={self.span.name!r}, children={len(self.children)})"

    # ------------------------------------------------------------------------------------------- construction
    @classmethod
    def from_spans(cls, spans: Sequence[Span]) -> TraceTree:
        """Build the tree of `spans` (see the module docstring). Raises ValueError for an empty list."""
        if not spans:
            raise ValueError("Cannot build a trace tree from an empty list of spans")
        by_id: dict[str, Span] = {}
        order: list[str] = []
        for span in spans:
            span_id = span.span_id
            if not span_id:
                fresh = Span.from_attributes(attributes={})
                logger.error("Span %r has no span id; using the generated id %s", span.name, fresh.span_id)
                span = span.model_copy(update={"span_id": fresh.span_id})
                span_id = span.span_id
            if span_id in by_id:
                logger.warning("Duplicate span id %s (%r); keeping the first span", span_id, span.name)
                continue
            by_id[span_id] = span
            order.append(span_id)

        children: dict[str, list[str]] = {}
        roots: list[str] = []
        missing: list[str] = []
        for span_id in order:
            parent_id = by_id[span_id].parent_id
            if not parent_id or parent_id == span_id:
                roots.append(span_id)
                continue
            children.setdefault(parent_id, []).append(span_id)
            if parent_id not in by_id and parent_id not in missing:
                missing.append(parent_id)

        built: dict[str, TraceTree] = {}
        visiting: set[str] = set()

        def build(node_id: str) -> TraceTree:
            # Iterative post-order build (traces can be deep); an edge back to a node being built (a parent cycle
            # in malformed input) is dropped.
            stack: list[tuple[str, bool]] = [(node_id, False)]
            while stack:
                current, expanded = stack.pop()
                if current in built:
                    continue
                if not expanded:
                    if current in visiting:
                        continue
                    visiting.add(current)
                    stack.append((current, True))
                    stack.extend(
                        (kid, False) for kid in children.get(current, []) if kid not in built and kid not in visiting
                    )
                    continue
                child_nodes = [built[kid] for kid in children.get(current, []) if kid in built]
                child_nodes.sort(key=lambda node: _time(node.start_time, math.inf))
                span = by_id.get(current) or _covering_span(
                    [node.span for node in child_nodes], name=AGL_VIRTUAL, span_id=current
                )
                built[current] = TraceTree(current, span, child_nodes)
            return built[node_id]

        root_nodes = [build(root_id) for root_id in roots + missing]
        unreachable = [span_id for span_id in order if span_id not in built]
        if unreachable:
            logger.warning(
                "%d spans form a parent cycle; the cycle is cut and they are attached to the root", len(unreachable)
            )
            for span_id in unreachable:
                if span_id not in built:
                    root_nodes.append(build(span_id))
        if len(root_nodes) == 1:
            return root_nodes[0]
        root_nodes.sort(key=lambda node: _time(node.start_time, math.inf))
        virtual = _covering_span([node.span for node in root_nodes], name=VIRTUAL_ROOT_ID)
        return TraceTree(VIRTUAL_ROOT_ID, virtual, root_nodes)

    # ---------------------------------------------------------------------------------------------- semantics
    def agent_name(self) -> Optional[str]:
        """The agent this span stands for, if any (first rule that applies).

        `agent.name` (OpenAI Agents SDK, LangGraph nodes, ...); `gen_ai.agent.name` (OpenTelemetry GenAI
        conventions: pydantic-ai, AutoGen, ...); for an `invoke_agent` span of those conventions without that
        attribute (`gen_ai.operation.name == "invoke_agent"`, or a span named `invoke_agent <name>`) the name in the
        span name, else `gen_ai.agent.id`; `operation.name` of an AgentOps agent span; `recipient_agent_type`
        (AutoGen runtime); `langchain.chain.type`; `executor.id` (Microsoft Agent Framework); for an OpenInference
        AGENT span its `graph.node.id`, else its name; for a LangGraph graph given a name, that name.
        """
        attributes = self.span.attributes
        for key in ("agent.name", "gen_ai.agent.name"):
            name = attributes.get(key)
            if isinstance(name, str) and name:
                return name
        invoked = invoked_agent_name(self.span.name, attributes)
        if invoked is not None:
            return invoked
        if attributes.get("agentops.span.kind") == "agent":
            name = attributes.get("operation.name")
            if isinstance(name, str) and name:
                return name
        for key in ("recipient_agent_type", "langchain.chain.type", "executor.id"):
            name = attributes.get(key)
            if isinstance(name, str) and name:
                return name
        if attributes.get("openinference.span.kind") == "AGENT":
            node = attributes.get("graph.node.id")
            return node if isinstance(node, str) and node else self.span.name
        if self.is_named_graph():
            return self.span.name
        return None

    def is_langgraph_node(self) -> bool:
        """Whether this span is a LangGraph node (marked `langgraph.node` when it was stored)."""
        return isinstance(self.span.attributes.get(LANGGRAPH_NODE), str)

    def is_named_graph(self) -> bool:
        """Whether this span is a LangGraph graph compiled with a name of its own (`create_react_agent(name=...)`,
        `compile(name=...)`): a span whose children include LangGraph nodes, named other than "LangGraph"."""
        return self.span.name != LANGGRAPH_DEFAULT_NAME and any(child.is_langgraph_node() for child in self.children)

    def maybe_reward_dict(self) -> dict[str, Any]:
        """`{"type": "reward", "value": v}` when this span holds a reward, else `{}`."""
        value = get_reward_value(self.span)
        return {"type": "reward", "value": value} if value is not None else {}

    def is_reward_span(self) -> bool:
        return get_reward_value(self.span) is not None

    # ---------------------------------------------------------------------------------------------- repairing
    def repair_hierarchy(self) -> None:
        """Move each direct child of the root under the node whose interval encloses it most tightly.

        Only strictly larger intervals qualify (equal intervals never do) and a child is never moved into its own
        subtree. Stops as soon as the root has a single child.
        """
        for child in list(self.children):
            if len(self.children) <= 1:
                break
            if child.start_time is None or child.end_time is None:
                continue
            own = {id(node) for node in child.traverse()}
            best: Optional[TraceTree] = None
            best_slack = math.inf
            for node in self.traverse():
                if node is self or id(node) in own or node.start_time is None or node.end_time is None:
                    continue
                if node.start_time <= child.start_time and node.end_time >= child.end_time:
                    slack = (node.end_time - child.end_time) + (child.start_time - node.start_time)
                    if 0 < slack < best_slack:
                        best, best_slack = node, slack
            if best is not None:
                self.children.remove(child)
                best.children.append(child)
                best.children.sort(key=lambda node: _time(node.start_time, math.inf))

    # ------------------------------------------------------------------------------------------- llm calls
    def find_llm_calls(
        self,
        *,
        llm_call_match: str,
        agent_match: Optional[str],
        within_matching_subtree: Optional[str] = None,
        within_reward: Optional[bool] = None,
        within_llm_call: Optional[bool] = None,
        existing_llm_call_response_ids: Optional[set[str]] = None,
    ) -> list[tuple[TraceTree, str]]:
        """LLM calls in this subtree (depth-first), each with the agent label it was found under.

        A span is an LLM call when its name matches `llm_call_match`, it lies inside an accepted agent's subtree
        (`within_matching_subtree` is not None) and not inside a reward span (`within_reward` is not True). With
        `within_llm_call` given, one call is counted once: nested spans of a counted call (no `gen_ai.response.id`),
        repeated response ids, and a span without a response id around a matching span that has one or has token
        ids (a framework's span around the SDK's record of the same call) are skipped. Below a span with an agent name, the label becomes that name if it matches `agent_match` (or
        there is no filter), else None: the descendants of other agents are excluded. A LangGraph node does not
        exclude the calls of the named graph it belongs to: when the node's name does not match, its calls keep the
        graph's label.
        """
        seen = existing_llm_call_response_ids if existing_llm_call_response_ids is not None else set()
        pattern = re.compile(llm_call_match)
        agent_pattern = re.compile(agent_match) if agent_match is not None else None
        result: list[tuple[TraceTree, str]] = []
        stack: list[tuple[TraceTree, Optional[str], Optional[bool], Optional[bool], bool]] = [
            (self, within_matching_subtree, within_reward, within_llm_call, False)
        ]
        while stack:
            node, label, in_reward, in_call, in_named_graph = stack.pop()
            child_in_call = in_call
            if label is not None and in_reward is not True and pattern.search(node.span.name):
                response_id = node.span.attributes.get("gen_ai.response.id")
                counted = True
                if (not response_id and in_call is True) or (response_id and str(response_id) in seen):
                    counted = False
                elif not response_id and in_call is False and node._wraps_a_recorded_call(pattern):
                    counted = False  # a framework's span (LangChain's ChatOpenAI) around the SDK's record of the call
                if counted:
                    result.append((node, label))
                    if response_id:
                        seen.add(str(response_id))
                    if in_call is not None:
                        child_in_call = True
            child_label = label
            agent = node.agent_name()
            if agent is not None:
                if agent_pattern is None or agent_pattern.search(agent):
                    child_label = agent
                elif not (in_named_graph and node.is_langgraph_node()):
                    child_label = None
            child_in_reward = in_reward
            if in_reward is not None and node.is_reward_span():
                child_in_reward = True
            named_graph = node.is_named_graph()
            for child in reversed(node.children):
                stack.append((child, child_label, child_in_reward, child_in_call, named_graph))
        return result

    def _wraps_a_recorded_call(self, pattern: re.Pattern[str]) -> bool:
        """Whether a span below this one matches `pattern` and carries the call's response id or token ids."""
        for node in self.traverse()[1:]:
            attributes = node.span.attributes
            if pattern.search(node.span.name) and (
                attributes.get("gen_ai.response.id") or token_id_list(attributes.get("prompt_token_ids"))
            ):
                return True
        return False

    # ---------------------------------------------------------------------------------------------- rewards
    def match_rewards(
        self, reward_match: Union[RewardMatchPolicy, str], llm_calls: Sequence[TraceTree]
    ) -> dict[str, Optional[float]]:
        """Assign reward values to LLM calls (node id -> reward; calls without a reward are absent)."""
        policy = RewardMatchPolicy(reward_match)
        call_ids = {node.id for node in llm_calls}
        assigned: dict[str, Optional[float]] = {}
        if policy == RewardMatchPolicy.FIRST_OCCURRENCE:
            nodes = sorted(self.traverse(), key=lambda node: _time(node.start_time, math.inf))
            self._assign(nodes, call_ids, assigned)
        else:
            for parent in self.traverse():
                siblings = sorted(parent.children, key=lambda node: _time(node.start_time, math.inf))
                self._assign(siblings, call_ids, assigned)
        return assigned

    @staticmethod
    def _assign(nodes: Iterable[TraceTree], call_ids: set[str], assigned: dict[str, Optional[float]]) -> None:
        calls: list[TraceTree] = []
        for node in nodes:
            if node.id in call_ids:
                calls.append(node)
                continue
            value = get_reward_value(node.span)
            if value is None:
                continue
            reward_start = _time(node.start_time, math.inf)
            for call in reversed(calls):
                if call.id in assigned or _time(call.end_time, math.inf) > reward_start:
                    continue
                assigned[call.id] = value
                break

    # ------------------------------------------------------------------------------------------- trajectory
    def span_to_triplet(self, span: Span, agent_name: str) -> Triplet:
        """One LLM call as a triplet: token ids (as returned by the server), raw messages and identifiers."""
        attributes = span.attributes
        prompt: dict[str, Any] = {"token_ids": token_id_list(attributes.get("prompt_token_ids")) or []}
        response: dict[str, Any] = {"token_ids": token_id_list(attributes.get("response_token_ids")) or []}
        logprobs = parse_literal(attributes.get("logprobs.content"))
        if isinstance(logprobs, list):
            response["logprobs"] = logprobs
        add_raw_content(attributes, prompt, response)
        return Triplet(
            prompt=prompt,
            response=response,
            reward=None,
            metadata={"response_id": attributes.get("gen_ai.response.id"), "agent_name": agent_name},
        )

    def to_trajectory(
        self,
        llm_call_match: str = LLM_CALL_MATCH,
        agent_match: Optional[str] = None,
        exclude_llm_call_in_reward: bool = True,
        dedup_llm_call: bool = True,
        reward_match: Union[RewardMatchPolicy, str] = RewardMatchPolicy.FIRST_OCCURRENCE,
        final_reward: Optional[float] = None,
        _skip_empty_token_spans: bool = False,
    ) -> list[Triplet]:
        """The triplets of the LLM calls in this tree, in the order they were made, with rewards matched."""
        kept = self._call_triplets(
            llm_call_match,
            agent_match,
            exclude_llm_call_in_reward,
            dedup_llm_call,
            reward_match,
            _skip_empty_token_spans,
        )
        triplets = [triplet for _, triplet in kept]
        if final_reward is not None and triplets:
            triplets[-1] = triplets[-1].model_copy(update={"reward": final_reward})
        return triplets

    def _call_triplets(
        self,
        llm_call_match: str,
        agent_match: Optional[str],
        exclude_llm_call_in_reward: bool,
        dedup_llm_call: bool,
        reward_match: Union[RewardMatchPolicy, str],
        skip_empty_token_spans: bool,
    ) -> list[tuple[Span, Triplet]]:
        """`to_trajectory`'s triplets (without a final reward), each with the span of its call."""
        calls = self.find_llm_calls(
            llm_call_match=llm_call_match,
            agent_match=agent_match,
            within_matching_subtree="*" if agent_match is None else None,
            within_reward=False if exclude_llm_call_in_reward else None,
            within_llm_call=False if dedup_llm_call else None,
            existing_llm_call_response_ids=set(),
        )
        kept: list[tuple[TraceTree, Triplet]] = []
        skipped = 0
        for node, label in calls:
            triplet = self.span_to_triplet(node.span, label)
            if skip_empty_token_spans and (not triplet.prompt["token_ids"] or not triplet.response["token_ids"]):
                skipped += 1
                continue
            kept.append((node, triplet))
        if skipped:
            logger.warning("Skipped %d of %d LLM calls without prompt or response token ids", skipped, len(calls))
        rewards = self.match_rewards(reward_match, [node for node, _ in kept])
        return [(node.span, triplet.model_copy(update={"reward": rewards.get(node.id)})) for node, triplet in kept]

    # ------------------------------------------------------------------------------------------ visualising
    def visualize(self, filename: str, interested_span_match: Optional[str] = None) -> None:
        """Render the tree with graphviz to `<filename>.png` (optionally only matching spans and their ancestors)."""
        try:
            import graphviz  # type: ignore[import-not-found]
        except ImportError as exc:
            raise ImportError("TraceTree.visualize needs the graphviz package: pip install graphviz") from exc
        pattern = re.compile(interested_span_match) if interested_span_match else None
        keep: set[str] = set()

        def mark(node: TraceTree) -> bool:
            hit = pattern is None or bool(pattern.search(node.span.name))
            for child in node.children:
                hit = mark(child) or hit
            if hit:
                keep.add(node.id)
            return hit

        mark(self)
        graph = graphviz.Digraph(comment="Trace tree")  # pyright: ignore[reportUnknownMemberType]
        for node in self.traverse():
            if node.id not in keep:
                continue
            agent = node.agent_name()
            label = f"{node.id[:8]} ({node.span.name})" + (f" [{agent}]" if agent else "")
            graph.node(node.id, label)  # pyright: ignore[reportUnknownMemberType]
            for child in node.children:
                if child.id in keep:
                    graph.edge(node.id, child.id)  # pyright: ignore[reportUnknownMemberType]
        graph.render(filename, format="png", cleanup=True)  # pyright: ignore[reportUnknownMemberType]


def _covering_span(spans: list[Span], *, name: str, span_id: Optional[str] = None) -> Span:
    """A synthetic span (ids of the first span, fresh span id unless given) covering the time of `spans`."""
    first = spans[0]
    starts = [span.start_time for span in spans if span.start_time is not None]
    ends = [span.end_time for span in spans if span.end_time is not None]
    return Span.from_attributes(
        attributes={},
        rollout_id=first.rollout_id,
        attempt_id=first.attempt_id,
        sequence_id=first.sequence_id,
        trace_id=first.trace_id,
        span_id=span_id,
        name=name,
        start_time=min(starts) if starts else None,
        end_time=max(ends) if ends else None,
    )
