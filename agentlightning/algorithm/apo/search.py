"""One APO search: the round loop over a `SearchState` (sample parents, critique and rewrite, select, check the leader).

`APO` owns the configuration, the store wiring and resumption; `BeamSearch` runs rounds. Every rollout goes through
the `PromptEvaluator` (cached, enqueued per phase), every optimizer call through `TextualGradient` (retried,
counted), and every choice of what to keep through the pure functions of `selection` and `candidates`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Optional, TypeVar

from agentlightning.types import PromptTemplate

from .candidates import check_candidate, clean_rewrite, describe_skips
from .evaluation import EvaluationRequest, PromptEvaluator
from .optimizer import TextualGradient
from .selection import sample_parents, select_by_mean, select_pareto
from .state import SearchState
from .types import APOHistoryEntry, VersionedPromptTemplate

__all__ = ["BeamSearch", "SearchConfig"]

logger = logging.getLogger("agentlightning.algorithm.apo")

T = TypeVar("T")

EDIT_LOG_SIZE = 100


@dataclass(frozen=True)
class SearchConfig:
    """The knobs of the search loop (see `APO` for their meaning) and the placeholders a candidate must keep
    (`required_fields`) and may use (`allowed_fields`)."""

    beam_width: int
    branch_factor: int
    beam_rounds: int
    selection: Literal["beam", "pareto"]
    run_initial_validation: bool
    required_fields: frozenset[str]
    allowed_fields: frozenset[str]


class BeamSearch:
    """Runs the rounds of one APO search; all state it changes is in `state`."""

    def __init__(
        self,
        config: SearchConfig,
        state: SearchState,
        evaluator: PromptEvaluator,
        gradient: TextualGradient,
        edit_log: deque[dict[str, Any]],
    ) -> None:
        self.config = config
        self.state = state
        self.evaluator = evaluator
        self.gradient = gradient
        self.edit_log = edit_log

    async def start(self, seed_template: PromptTemplate, val: list[Any]) -> None:
        """The seed becomes v0, the beam and the best prompt (scored on the validation set if configured)."""
        seed = self.state.new_version(seed_template)
        self.state.beam = [seed]
        self.state.set_best(seed, None)
        if self.config.run_initial_validation:
            (outcome,) = await self.evaluator.evaluate([EvaluationRequest(seed, val, "val", 0, "seed")])
            seed.score = outcome.score
            self.state.set_best(seed, outcome.score)
            logger.info(
                "APO seed prompt %s scores %s on %d validation tasks", seed.version, format_score(seed.score), len(val)
            )
        self.state.history.append(APOHistoryEntry(0, seed.version, seed_template.template, seed.score, "seed", True))

    async def run_round(
        self, round_num: int, grad_iter: Iterator[Sequence[Any]], val_iter: Iterator[Sequence[Any]], val: list[Any]
    ) -> None:
        """One round: parents, candidates, selection on a validation batch, the leader check; then a log line."""
        enqueued, skipped = self.state.stats.rollouts_enqueued, dict(self.state.stats.skipped)
        parents = self.sample_parent_prompts(self.state.beam, round_num)
        candidates = await self.generate_candidate_prompts(parents, grad_iter, round_num)
        self.state.beam = await self.evaluate_and_select_beam(self.state.beam + candidates, val_iter, round_num)
        await self.update_best_prompt(self.state.beam, val, round_num)
        new_skips = {reason: count - skipped.get(reason, 0) for reason, count in self.state.stats.skipped.items()}
        logger.info(
            "APO round %d/%d: %d new candidates (skipped: %s); beam %s; best %s (%s); %d rollouts enqueued",
            round_num,
            self.config.beam_rounds,
            len(candidates),
            describe_skips(new_skips),
            ", ".join(f"{prompt.version}={format_score(prompt.score)}" for prompt in self.state.beam),
            self.state.best_version,
            format_score(self.state.best_score),
            self.state.stats.rollouts_enqueued - enqueued,
        )

    def sample_parent_prompts(
        self, beam: list[VersionedPromptTemplate], round_num: int
    ) -> list[tuple[int, VersionedPromptTemplate]]:
        """`beam_width` parents (the beam repeated when it is smaller)."""
        if len(beam) < self.config.beam_width:
            logger.debug("APO round %d: the beam holds %d prompts; parents repeat", round_num, len(beam))
        return sample_parents(beam, self.config.beam_width, self.state.rng)

    async def generate_candidate_prompts(
        self, parents: list[tuple[int, VersionedPromptTemplate]], grad_iter: Iterator[Sequence[Any]], round_num: int
    ) -> list[VersionedPromptTemplate]:
        """Run each parent on `branch_factor` gradient batches, critique and rewrite; the rewrites that pass."""
        jobs = [(parent, list(next(grad_iter))) for _, parent in parents for _ in range(self.config.branch_factor)]
        outcomes = await self.evaluator.evaluate(
            [EvaluationRequest(parent, batch, "train", round_num, "gradient") for parent, batch in jobs]
        )
        # The random choices are drawn here, in job order; then the optimizer calls run concurrently.
        plans = [self.gradient.plan(outcome.results, self.state.rng) for outcome in outcomes]
        answers = await _gather(
            [
                self.gradient.critique_and_rewrite(plan, parent.prompt_template.template)
                for (parent, _), plan in zip(jobs, plans, strict=True)
            ]
        )
        seen = {prompt.prompt_template.template.strip() for prompt in self.state.beam}
        known = {entry.prompt: entry.version for entry in self.state.history}
        candidates: list[VersionedPromptTemplate] = []
        for (parent, _), outcome in zip(jobs, answers, strict=True):
            self.state.stats.candidates_proposed += 1
            reason = outcome.reason
            text = clean_rewrite(outcome.answer) if reason is None else ""
            if reason is None:
                reason = check_candidate(
                    text,
                    engine=parent.prompt_template.engine,
                    required_fields=self.config.required_fields,
                    allowed_fields=self.config.allowed_fields,
                    parent_text=parent.prompt_template.template,
                    max_chars=max(4000, 20 * len(parent.prompt_template.template)),
                )
            if reason is None and text.strip() in seen:
                reason = "duplicate"
            self.edit_log.append(
                {
                    "round": round_num,
                    "parent": parent.version,
                    "critique": outcome.critique,
                    "rewrite": outcome.answer,
                    "verdict": reason or "accepted",
                }
            )
            if reason is not None:
                self.state.stats.skip(reason)
                logger.info("APO round %d: a rewrite of %s is skipped (%s)", round_num, parent.version, reason)
                continue
            seen.add(text.strip())
            template = PromptTemplate(template=text, engine=parent.prompt_template.engine)
            earlier = known.get(text)  # a prompt dropped from the beam earlier keeps its version (and its cache)
            candidates.append(
                VersionedPromptTemplate(earlier, template) if earlier else self.state.new_version(template)
            )
            self.state.stats.candidates_accepted += 1
        return candidates

    async def evaluate_and_select_beam(
        self, candidates: list[VersionedPromptTemplate], val_iter: Iterator[Sequence[Any]], round_num: int
    ) -> list[VersionedPromptTemplate]:
        """Score every prompt on one validation batch, record them in the history, keep the selected ones."""
        if not candidates:
            raise ValueError("No beam candidates any more")
        batch = list(next(val_iter))
        outcomes = await self.evaluator.evaluate(
            [EvaluationRequest(candidate, batch, "val", round_num, "val") for candidate in candidates]
        )
        for candidate, outcome in zip(candidates, outcomes, strict=True):
            candidate.score = outcome.score
        scores = [candidate.score for candidate in candidates]
        if self.config.selection == "pareto":
            kept = select_pareto([outcome.per_task for outcome in outcomes], scores, self.config.beam_width)
        else:
            kept = select_by_mean(scores, self.config.beam_width)
        for index, candidate in enumerate(candidates):
            entry = APOHistoryEntry(
                round_num, candidate.version, candidate.prompt_template.template, candidate.score, "candidate"
            )
            self.state.history.append(replace(entry, selected=index in kept))
        if len(candidates) > 1 and len(set(scores)) == 1:
            logger.info(
                "APO round %d: all %d prompts score %s on the batch; the beam keeps its order",
                round_num,
                len(scores),
                format_score(scores[0]),
            )
        return [candidates[index] for index in kept]

    async def update_best_prompt(self, beam: list[VersionedPromptTemplate], val: list[Any], round_num: int) -> None:
        """Score the beam's leader on the whole validation set; it becomes the best when it beats the best."""
        leader = beam[0]
        (outcome,) = await self.evaluator.evaluate([EvaluationRequest(leader, val, "val", round_num, "leader")])
        score = outcome.score
        self.state.history.append(
            APOHistoryEntry(round_num, leader.version, leader.prompt_template.template, score, "leader", True)
        )
        if score is not None and score > self.state.best_score:
            logger.info(
                "APO round %d: new best prompt %s, validation score %s", round_num, leader.version, format_score(score)
            )
            self.state.set_best(leader, score)
        else:
            logger.info(
                "APO round %d: leader %s scores %s, not above the best %s (%s)",
                round_num,
                leader.version,
                format_score(score),
                self.state.best_version,
                format_score(self.state.best_score),
            )


def format_score(score: Optional[float]) -> str:
    return "n/a" if score is None or math.isinf(score) else f"{score:.4f}"


async def _gather(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
