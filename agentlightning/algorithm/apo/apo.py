"""APO: automatic prompt optimization by beam search over prompt templates with textual gradients.

Each round: pick parents from the beam; for each parent and branch, run it on a batch of training tasks, ask the
optimizer model for a critique of the template given those runs (the "textual gradient") and for a rewrite that
applies the critique; score the beam and the new candidates on one validation batch and keep the best; score the
beam's leader on the whole validation set and publish the best prompt so far as a new resources version.

All rollouts of a phase are enqueued together (runners work in parallel), a (prompt, task) pair is rolled out at
most once per run, and the run's state is checkpointed in the store after every round so a stopped run resumes
from its last completed round. Failed or junk optimizer answers are retried or skipped and counted, never fatal.
"""

from __future__ import annotations

import logging
import random
import re
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Optional, TypeVar

from agentlightning.adapter.messages import TraceToMessages
from agentlightning.types import LLM, Dataset, NamedResources, PromptTemplate, Rollout, RolloutMode
from agentlightning.utils.retry import RetryPolicy

from ..base import Algorithm
from ..tracking import Tracker, TrackingOption, flatten_metrics, make_tracker
from ..utils import batch_iter_over_dataset, with_llm_proxy
from .candidates import content_key, describe_skips, fillable_fields, template_fields
from .checkpoint import CheckpointRecord, load_prompts, scan_run
from .evaluation import EvaluationRequest, PromptEvaluator, read_rollout_results
from .optimizer import OptimizerClient, TextualGradient
from .search import EDIT_LOG_SIZE, BeamSearch, SearchConfig, format_score
from .state import SearchState
from .templates import DEFAULT_APPLY_EDIT_TEMPLATES, DEFAULT_GRADIENT_TEMPLATES, Kind, MetaPrompt
from .tracking import round_metrics, run_settings
from .types import APOHistoryEntry, APOStats, RolloutResultForAPO, VersionedPromptTemplate

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from agentlightning.llm_proxy import LLMProxy

__all__ = ["APO"]

logger = logging.getLogger(__name__)

T_task = TypeVar("T_task")
Selection = Literal["beam", "pareto"]
_RUN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _meta_prompts(
    name: str, texts: Optional[Sequence[str]], kind: Kind, default: tuple[MetaPrompt, ...]
) -> tuple[MetaPrompt, ...]:
    if texts is None:
        return default
    if isinstance(texts, str) or not texts:
        raise ValueError(f"{name} must be a non-empty list of template strings")
    return tuple(MetaPrompt(f"{name}[{index}]", text, kind) for index, text in enumerate(texts))


class APO(Algorithm, Generic[T_task]):
    """Automatic prompt optimization (textual-gradient beam search) for the first PromptTemplate resource.

    Args:
        async_openai_client: the optimizer endpoint (any OpenAI-compatible server) for critiques and rewrites.
        gradient_model: model that writes critiques.
        apply_edit_model: model that rewrites the template following a critique.
        diversity_temperature: sampling temperature of both optimizer calls.
        gradient_batch_size: training runs shown to the critic per critique.
        val_batch_size: validation tasks that every beam member and candidate is scored on each round.
        beam_width: prompts kept per round (and parents sampled per round).
        branch_factor: candidates generated per parent.
        beam_rounds: rounds to run (a resumed run continues up to this number).
        rollout_batch_timeout: seconds to wait for a phase's rollouts before cancelling the unfinished ones.
        run_initial_validation: score the seed prompt on the whole validation set before the first round.
        selection: "beam" (keep the best mean scores) or "pareto" (keep prompts best on at least one task).
        gradient_prompts / apply_edit_prompts: custom critique / rewrite templates (`string.Template` syntax; see
            `agentlightning.algorithm.apo.templates`).
        seed: seed of every random choice (None: drawn at the start and recorded in the checkpoint).
        run_id: names the run's resources (`<run_id>-v3`, `<run_id>-best`) and checkpoint in the store.
        resume: continue the run recorded under `run_id` in the store, if any.
        llm_max_retries / llm_retry_delay: retries of a failed optimizer call, the first after `llm_retry_delay`
            seconds and then doubling.
        max_concurrent_llm_calls: optimizer calls in flight at once.
        completion_kwargs: extra arguments for every optimizer request (e.g. `{"max_tokens": 512}`).
        tracking: experiment tracking of the run's settings, and of each round's scores and counters: "tensorboard",
            "mlflow", "wandb", a list of them, `{name: options}` or a `Tracker` (see
            `agentlightning.algorithm.tracking`); local files go under `runs/<run_id>/`. None: no tracking.
        resample_scores: roll a (prompt, task) pair out again whenever a later round scores it on validation tasks,
            and score it by the mean over its samples, so an agent that samples (temperature > 0, the default of
            most APIs) cannot keep a lucky first score; False: one rollout per pair and run (for deterministic
            agents, at a lower cost).
    """

    def __init__(
        self,
        async_openai_client: AsyncOpenAI,
        *,
        gradient_model: str = "gpt-5-mini",
        apply_edit_model: str = "gpt-4.1-mini",
        diversity_temperature: float = 1.0,
        gradient_batch_size: int = 4,
        val_batch_size: int = 16,
        beam_width: int = 4,
        branch_factor: int = 4,
        beam_rounds: int = 3,
        rollout_batch_timeout: float = 3600.0,
        run_initial_validation: bool = True,
        _poml_trace: bool = False,
        selection: Selection = "beam",
        gradient_prompts: Optional[Sequence[str]] = None,
        apply_edit_prompts: Optional[Sequence[str]] = None,
        seed: Optional[int] = None,
        run_id: str = "apo",
        resume: bool = True,
        llm_max_retries: int = 3,
        llm_retry_delay: float = 1.0,
        max_concurrent_llm_calls: int = 4,
        completion_kwargs: Optional[dict[str, Any]] = None,
        resample_scores: bool = True,
        tracking: TrackingOption = None,
    ) -> None:
        chat = getattr(getattr(async_openai_client, "chat", None), "completions", None)
        if not callable(getattr(chat, "create", None)):
            raise TypeError("async_openai_client must be an openai.AsyncOpenAI (or compatible) client")
        if diversity_temperature < 0:
            raise ValueError(f"diversity_temperature must not be negative, got {diversity_temperature}")
        if isinstance(beam_rounds, bool) or not isinstance(beam_rounds, int) or beam_rounds < 0:
            raise ValueError(f"beam_rounds must be a non-negative integer, got {beam_rounds!r}")
        if not rollout_batch_timeout > 0:
            raise ValueError(f"rollout_batch_timeout must be positive, got {rollout_batch_timeout}")
        if selection not in ("beam", "pareto"):
            raise ValueError(f"selection must be 'beam' or 'pareto', got {selection!r}")
        if not _RUN_ID.match(run_id):
            raise ValueError(f"run_id must be 1-64 letters, digits, '_', '.' or '-', got {run_id!r}")
        if llm_max_retries < 0 or llm_retry_delay < 0:
            raise ValueError("llm_max_retries and llm_retry_delay must not be negative")
        if _poml_trace:
            logger.warning("APO(_poml_trace=True) has no effect: prompts are not rendered with POML here")
        self.async_openai_client = async_openai_client
        self.gradient_model = gradient_model
        self.apply_edit_model = apply_edit_model
        self.diversity_temperature = diversity_temperature
        self.gradient_batch_size = _positive("gradient_batch_size", gradient_batch_size)
        self.val_batch_size = _positive("val_batch_size", val_batch_size)
        self.beam_width = _positive("beam_width", beam_width)
        self.branch_factor = _positive("branch_factor", branch_factor)
        self.beam_rounds = beam_rounds
        self.rollout_batch_timeout = rollout_batch_timeout
        self.run_initial_validation = run_initial_validation
        self.selection: Selection = selection
        self.gradient_prompts = _meta_prompts(
            "gradient_prompts", gradient_prompts, "gradient", DEFAULT_GRADIENT_TEMPLATES
        )
        self.apply_edit_prompts = _meta_prompts(
            "apply_edit_prompts", apply_edit_prompts, "apply_edit", DEFAULT_APPLY_EDIT_TEMPLATES
        )
        self.seed = seed
        self.resample_scores = resample_scores
        self.run_id = run_id
        self.resume = resume
        self.stats = APOStats()
        client = OptimizerClient(
            async_openai_client,
            stats=self.stats,
            retry=RetryPolicy(max_retries=llm_max_retries, initial_delay=llm_retry_delay, max_delay=60.0, jitter=0.0),
            max_concurrency=_positive("max_concurrent_llm_calls", max_concurrent_llm_calls),
            completion_kwargs=completion_kwargs,
        )
        self._gradient = TextualGradient(
            client,
            gradient_model=gradient_model,
            apply_edit_model=apply_edit_model,
            temperature=diversity_temperature,
            gradient_batch_size=self.gradient_batch_size,
            gradient_prompts=self.gradient_prompts,
            apply_edit_prompts=self.apply_edit_prompts,
        )
        self._state = SearchState(seed=seed if seed is not None else 0, stats=self.stats)
        self._resource_name: Optional[str] = None
        self._evaluator_instance: Optional[PromptEvaluator] = None
        self._default_adapter = TraceToMessages()
        self._edit_log: deque[dict[str, Any]] = deque(maxlen=EDIT_LOG_SIZE)
        self.tracking = tracking

    # ------------------------------------------------------------------------------------------- accessors
    def _create_versioned_prompt(
        self, prompt_template: PromptTemplate, *, score: Optional[float] = None
    ) -> VersionedPromptTemplate:
        return self._state.new_version(prompt_template, score)

    def get_seed_prompt_template(self) -> tuple[str, PromptTemplate]:
        """The (resource name, template) of the first PromptTemplate in the initial resources."""
        resources = self.get_initial_resources()
        if not resources:
            raise ValueError("APO needs initial resources with a PromptTemplate to optimize; none were given")
        for name, resource in resources.items():
            if isinstance(resource, PromptTemplate):
                return name, resource
        raise ValueError(f"APO found no PromptTemplate among the initial resources ({', '.join(resources)})")

    def get_adapter(self) -> TraceToMessages:  # type: ignore[override]
        """The adapter that turns spans into the conversations shown to the critic (a TraceToMessages; one is
        created when none was set)."""
        if self._adapter_ref is None:
            return self._default_adapter
        adapter = super().get_adapter()
        if not isinstance(adapter, TraceToMessages):
            raise ValueError(
                f"APO needs a TraceToMessages adapter to show conversations to the critic, got "
                f"{type(adapter).__name__}; pass adapter=agl.TraceToMessages() to the Trainer"
            )
        return adapter

    def get_best_prompt(self) -> PromptTemplate:
        """The best prompt found so far (the seed until something beats it). Raises ValueError before a run."""
        if self._state.best is None:
            raise ValueError("No best prompt yet: run APO first")
        return self._state.best.prompt_template

    @property
    def best_score(self) -> float:
        """The best prompt's score on the whole validation set (-inf when it was never scored)."""
        return self._state.best_score

    @property
    def best_version(self) -> Optional[str]:
        return self._state.best.version if self._state.best is not None else None

    def get_history(self) -> list[APOHistoryEntry]:
        """Every scored prompt in order: the seed (round 0), then per round the candidates and the leader."""
        return list(self._state.history)

    def get_edit_log(self) -> list[dict[str, Any]]:
        """The latest optimizer exchanges of this process (at most 100): round, parent version, critique, rewrite and
        verdict ("accepted" or the reason it was skipped). Handy to see why candidates were rejected."""
        return list(self._edit_log)

    def get_beam(self) -> list[VersionedPromptTemplate]:
        """The current beam, best first."""
        return list(self._state.beam)

    # ------------------------------------------------------------------------------------------- evaluation
    def _resources_for(self, prompt: VersionedPromptTemplate) -> NamedResources:
        # Every snapshot holds all initial resources (an LLM endpoint, say) with the optimized prompt replaced.
        name = self._resource_name or self.get_seed_prompt_template()[0]
        resources: NamedResources = dict(self.get_initial_resources() or {})
        resources[name] = prompt.prompt_template
        return resources

    def _evaluator(self) -> PromptEvaluator:
        store = self.get_store()
        current = self._evaluator_instance
        if current is None or current.store is not store or current.session != self._state.session:
            current = PromptEvaluator(
                store,
                self.get_adapter(),
                run_id=self.run_id,
                session=self._state.session,
                resources_for=self._resources_for,
                timeout=self.rollout_batch_timeout,
                stats=self.stats,
                resample=self.resample_scores,
            )
            self._evaluator_instance = current
        return current

    async def get_rollout_results(self, rollouts: Sequence[Rollout]) -> list[RolloutResultForAPO]:
        """Status, final reward, spans and conversations of each rollout (its latest attempt)."""
        return await read_rollout_results(self.get_store(), self.get_adapter(), rollouts)

    async def evaluate_prompt_on_batch(
        self,
        prompt: VersionedPromptTemplate,
        resource_name: str,
        dataset: Sequence[T_task],
        mode: RolloutMode,
        *,
        prefix: Optional[str] = None,
    ) -> tuple[list[RolloutResultForAPO], float]:
        """Roll `prompt` out on `dataset` (pairs already rolled out are reused); returns the results of the finished
        rollouts and their mean reward (a missing reward counts as 0)."""
        self._resource_name = resource_name
        request = EvaluationRequest(prompt, list(dataset), mode, self.stats.rounds_completed, prefix or "eval")
        (outcome,) = await self._evaluator().evaluate([request])
        return outcome.results, outcome.score if outcome.score is not None else 0.0

    # ------------------------------------------------------------------------------------------- optimizer
    async def compute_textual_gradient(
        self,
        current_prompt: VersionedPromptTemplate,
        rollout_results: Sequence[RolloutResultForAPO],
        *,
        prefix: Optional[str] = None,
    ) -> Optional[str]:
        """A critique of `current_prompt` from (a sample of `gradient_batch_size` of) its rollout results; None
        when the optimizer call failed."""
        plan = self._gradient.plan(rollout_results, self._state.rng)
        return await self._gradient.critique(plan, current_prompt.prompt_template.template)

    async def textual_gradient_and_apply_edit(
        self,
        current_prompt: VersionedPromptTemplate,
        rollout_results: Sequence[RolloutResultForAPO],
        *,
        prefix: Optional[str] = None,
    ) -> Optional[str]:
        """Critique, then rewrite: the new template text (the old one when the critique is empty; None when a call
        failed)."""
        plan = self._gradient.plan(rollout_results, self._state.rng)
        outcome = await self._gradient.critique_and_rewrite(plan, current_prompt.prompt_template.template)
        return outcome.answer

    # ------------------------------------------------------------------------------------------- the search
    async def run(
        self, train_dataset: Optional[Dataset[T_task]] = None, val_dataset: Optional[Dataset[T_task]] = None
    ) -> None:
        """Optimize the seed prompt for `beam_rounds` rounds (continuing a stopped run recorded in the store).

        An LLM proxy set on the algorithm (the Trainer's `llm_proxy=`) that is not running is started for the run
        and stopped after it."""
        await self._run_with_proxy(train_dataset, val_dataset)

    @with_llm_proxy()
    async def _run_with_proxy(
        self,
        llm_proxy: Optional[LLMProxy],
        train_dataset: Optional[Dataset[T_task]],
        val_dataset: Optional[Dataset[T_task]],
    ) -> None:
        resource_name, seed_template = self.get_seed_prompt_template()
        self._resource_name = resource_name
        train = _materialize("train_dataset", train_dataset)
        val = _materialize("val_dataset", val_dataset)
        fingerprint = content_key(
            [
                resource_name,
                seed_template.engine,
                seed_template.template,
                [content_key(task) for task in train],
                [content_key(task) for task in val],
                _resources_identity(self.get_initial_resources() or {}, resource_name),
            ]
        )
        record = await self._restore_or_reset(fingerprint)
        config = self._search_config(seed_template, train + val)
        search = BeamSearch(config, self._state, self._evaluator(), self._gradient, self._edit_log)
        grad_iter = self._batches("gradient", train, self.gradient_batch_size)
        val_iter = self._batches("val", val, self.val_batch_size)
        tracker = make_tracker(self.tracking, directory=Path("runs") / self.run_id, run_name=self.run_id)
        try:
            if tracker is not None:
                tracker.log_params(run_settings(self))
            if not self._state.history:
                await search.start(seed_template, val)
                await self._checkpoint(record, fingerprint)
                _track_round(tracker, self._state, 0)
            for round_num in range(self.stats.rounds_completed + 1, self.beam_rounds + 1):
                await search.run_round(round_num, grad_iter, val_iter, val)
                self.stats.rounds_completed = round_num
                await self._checkpoint(record, fingerprint)
                _track_round(tracker, self._state, round_num)
        finally:
            if tracker is not None:
                tracker.close()
        logger.info(
            "APO run %r done after %d rounds: best prompt %s (validation score %s); %d rollouts enqueued, %d reused; "
            "%d optimizer calls (%d retried, %d failed); skipped candidates: %s",
            self.run_id,
            self.stats.rounds_completed,
            self.best_version,
            format_score(self.best_score),
            self.stats.rollouts_enqueued,
            self.stats.rollouts_reused,
            self.stats.llm_calls,
            self.stats.llm_retries,
            self.stats.llm_failures,
            describe_skips(self.stats.skipped),
        )

    def _search_config(self, seed: PromptTemplate, tasks: list[Any]) -> SearchConfig:
        try:
            fields = template_fields(seed.template, seed.engine)
        except ValueError as exc:
            raise ValueError(f"The seed prompt template is not a valid {seed.engine} template: {exc}") from exc
        if tasks and all(isinstance(task, dict) for task in tasks):
            missing = sorted(name for name in fields if any(name not in task for task in tasks))
            if missing:
                logger.warning(
                    "The seed prompt's placeholders %s are not keys of every task; if the agent fills the template "
                    "from the task, those rollouts will fail",
                    missing,
                )
        return SearchConfig(
            beam_width=self.beam_width,
            branch_factor=self.branch_factor,
            beam_rounds=self.beam_rounds,
            selection=self.selection,
            run_initial_validation=self.run_initial_validation,
            required_fields=frozenset(fields),
            allowed_fields=frozenset(fillable_fields(fields, tasks)),
        )

    def _batches(self, stream: str, tasks: list[Any], size: int) -> Iterator[Sequence[Any]]:
        # One generator per stream, seeded from the run seed, so a resumed run continues at the same position.
        iterator = batch_iter_over_dataset(tasks, size, rng=random.Random(f"{self._state.seed}:{stream}"))
        for _ in range(self._state.batches_drawn[stream]):
            next(iterator)

        def counted() -> Iterator[Sequence[Any]]:
            for batch in iterator:
                self._state.batches_drawn[stream] += 1
                yield batch

        return counted()

    async def _restore_or_reset(self, fingerprint: str) -> CheckpointRecord:
        """Load the run recorded under `run_id` (when resuming), or start a fresh state. Returns the record."""
        store = self.get_store()
        found, rollouts = await scan_run(store, self.run_id)
        record = CheckpointRecord(store, self.run_id, found.rollout_id if found is not None else None)
        checkpoint = CheckpointRecord.parse(found) if found is not None and self.resume else None
        if checkpoint is None:
            seed = self.seed if self.seed is not None else random.SystemRandom().randrange(2**62)
            self.stats.__dict__.update(APOStats().__dict__)
            self._state = SearchState(seed=seed, stats=self.stats)
            return record
        if checkpoint.fingerprint != fingerprint:
            raise ValueError(
                f"The store holds APO run {self.run_id!r} for another seed prompt, other datasets or other resources "
                "(another model or sampling parameters); pass a new run_id to start a separate run, or resume=False "
                "to start this one afresh"
            )
        versions = SearchState.versions_named(checkpoint)
        prompts = await load_prompts(store, self.run_id, self._resource_name or "", versions)
        self._state = SearchState.from_checkpoint(checkpoint, prompts, self.stats)
        reused = self._evaluator().restore(rollouts)
        logger.info(
            "Resuming APO run %r after round %d of %d (%d rollouts of its earlier life are reused)",
            self.run_id,
            checkpoint.completed_rounds,
            self.beam_rounds,
            reused,
        )
        return record

    async def _checkpoint(self, record: CheckpointRecord, fingerprint: str) -> None:
        """Publish the beam and the best prompt, then record the state (the round counts as completed now)."""
        evaluator = self._evaluator()
        best = self._state.best
        assert best is not None
        for prompt in [*self._state.beam, best]:
            await evaluator.publish(prompt)
        # The best prompt so far as a new version of `<run_id>-best`, which is the latest resources from now on.
        await self.get_store().update_resources(f"{self.run_id}-best", self._resources_for(best))
        await record.save(self._state.to_checkpoint(self.run_id, fingerprint))


def _track_round(tracker: Optional[Tracker], state: SearchState, round_num: int) -> None:
    if tracker is not None:
        tracker.log_metrics(flatten_metrics(round_metrics(state, round_num)), round_num)


def _resources_identity(resources: NamedResources, optimized: str) -> list[Any]:
    """What the scores depend on besides the prompt: each other resource, an LLM by its model and sampling
    parameters (its endpoint and key are left out: a local server comes back on another port). Resuming with
    another model would otherwise reuse the old model's scores."""
    identity: list[Any] = []
    for name in sorted(resources):
        if name == optimized:
            continue
        resource = resources[name]
        if isinstance(resource, LLM):
            identity.append([name, "llm", resource.model, resource.sampling_parameters])
        else:
            identity.append([name, resource.model_dump(mode="json")])
    return identity


def _materialize(name: str, dataset: Optional[Dataset[Any]]) -> list[Any]:
    if dataset is None:
        raise ValueError(f"APO needs a {name}: training tasks feed the critiques, validation tasks score the prompts")
    try:
        tasks = [dataset[index] for index in range(len(dataset))]
    except Exception as exc:
        raise ValueError(
            f"{name} must be indexable with a length (a list of tasks); reading it failed: {exc!r}"
        ) from exc
    if not tasks:
        raise ValueError(f"APO needs a non-empty {name}")
    return tasks
