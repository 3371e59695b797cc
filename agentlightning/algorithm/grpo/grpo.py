"""GRPO: group-relative policy optimisation of the model an agent calls, through the real training components.

Each step: pick `tasks_per_step` training tasks and enqueue each `group_size` times (against the current resources
version: a `ProxyLLM` in front of the local inference server); wait for the rollouts; read each rollout's final
reward and its LLM calls with the exact token ids (never re-tokenized); normalise rewards within each task's group;
update the policy with the clipped policy-gradient loss; swap the new weights into the inference server in place;
publish the next resources version. Checkpoints are written every `checkpoint_every` steps, at the end and on
Ctrl-C; a run started again with the same `output_dir` continues from the last one.

This module drives the run; its parts are the package's subpackages: `rollouts` (enqueueing rollouts through the
store, reading back their calls and rewards, what the proxy recorded of each call), `sampling` (the task stream, a
step's sampling rounds until enough groups are informative, when to stop sampling extra), `learning` (advantages,
samples, the loss and the update on its own thread, the policy and its checkpoints), `serving` (the policy served by
our inference server or vLLM, chosen from GRPO's arguments, behind the LLM proxy's routes to it: `Endpoint`) and
`reporting` (each step's history entry and log lines, evaluation reports, the run's health, experiment tracking, the
run's state a checkpoint records and a resumed run restores). Its settings are `config` (`GRPOConfig`, in sections).
What it trains is `trained`: one policy, or with several agents (`agent_match` a list or dict) one LoRA adapter per
agent, each trained on its own agent's calls and rewards (`rollouts/agents.py`, `learning/agent_policy.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from agentlightning.types import Dataset, Rollout, RolloutMode
from agentlightning.utils.memory import release_free_memory

from ..base import Algorithm
from ..events import EventListener
from ..tracking import Tracker, TrackingOption, make_tracker
from .config import GRPOConfig
from .learning.checkpoint import find_latest, load_checkpoint, save_checkpoint
from .learning.loss import Sample
from .learning.sampler_gap import choose_correction
from .learning.samples import DriftCounts
from .learning.update_thread import UpdateThread
from .report import run_summary, write_run_outputs
from .reporting.evaluation import EvaluationReport, evaluation_report
from .reporting.health_log import RunHealth, log_verdict
from .reporting.health_store import POINTER_KEY, HealthRecordWriter
from .reporting.run_state import restore_run_state, run_state, timed
from .reporting.step_log import (
    check_sampling,
    count_drift,
    history_entry,
    log_evaluation,
    log_no_update,
    log_step,
    step_details,
)
from .reporting.tracking import track_or_stop
from .rollouts.agents import AgentMatch, AgentRollouts
from .rollouts.call_checks import ServedBy
from .rollouts.collector import RolloutCollector
from .rollouts.dispatch import cancel_stale_rollouts
from .rollouts.reading import RolloutData, SkipCounts, count_skips
from .rollouts.sampling_check import SamplingMismatches
from .sampling.balance import stratify
from .sampling.rounds import sample_groups
from .sampling.saturation import reward_saturated
from .sampling.schedule import SamplingCounts, StepBudget
from .sampling.task_stream import TaskStream
from .serving.build import build_policy_and_serving, choose_serving
from .serving.endpoint import Endpoint
from .serving.options import ProxyOptions, VllmOptions, check_proxy_options
from .trained import trained_for

if TYPE_CHECKING:
    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.inference.server import InferenceServer

    from .learning.agent_policy import AgentPolicies
    from .learning.policy import Policy

__all__ = ["GRPO", "EvaluationReport"]

logger = logging.getLogger(__name__)

EventCallback = EventListener


class GRPO(Algorithm):
    """Train the model behind the agent's `LLM` resource with GRPO (see the module docstring).

    Args:
        model: a local transformers model folder to train (None: the engine's model, else the embedded SmolLM2);
            nothing is downloaded. GRPO trains on `device` ("auto": one CUDA GPU when available, else the CPU).
        engine: serve and train this `InferenceEngine` (in this process; the policy is a copy of its model).
        server: an already running in-process `InferenceServer` to use (its engine is the one updated).
        server_url: a separate OpenAI-compatible Agent Lightning inference server (weights go by file and
            `POST /v1/weights`; it must see `output_dir`); needs `model`.
        serving: "vllm" samples from a vLLM server instead of our inference server (started here, or given by
            `vllm={"url": ...}`); LoRA adapters (or, for a full fine-tune, the weights) reach it at runtime. See
            docs/vllm.md. The policy is trained from `model` (default: the embedded SmolLM2's folder).
        vllm: options of the vLLM server: a `VllmOptions` or a dict of its fields (`url`, `command`, `args`, ...).
        output_dir: where checkpoints and, at the end of `run` (also after Ctrl-C, for what ran), `summary.json`,
            `reward_curve.png`, `accuracy.png` and `final_model/` go (see `report.write_run_outputs`; None: none of
            them).
        save_final_model: write `final_model/` (the trained model, LoRA merged in) at the end; False: the
            checkpoints only.
        resume: continue from the last checkpoint in `output_dir`, if any.
        agent_match: regex on agent names: only LLM calls made inside matching agents are trained on (needs
            client-side spans of the calls, e.g. `OtelTracer(instrument=["openai"])`). Several agents, each with
            its own LoRA adapter on the shared base model (needs `lora_rank`): a list of agent names or a dict
            `{adapter name: pattern}`; agent X then reads its own LLM resource `X_llm` (model name X; or sends the
            header `x-agl-agent: X` with the base model's name), is trained on its own calls and rewards (see
            `rollouts/agents.py`), and agents not selected keep the base model (`resource_name`). Served by the in-process
            engine, or by vLLM with `serving="vllm"` (each agent's adapter loaded as `<agent>@step-N`; docs/vllm.md).
        resource_name: the name of the LLM resource the agent reads.
        balance_by: `task -> stratum` (any hashable value, e.g. `lambda task: task["kind"]`): each step draws its
            tasks evenly across the strata (see `sampling/balance.py`; each step's history says how many of each it drew),
            and its health record holds the mean reward per stratum (a stratum left far behind is warned about).
            None: a seeded shuffle of the whole dataset.
        proxy: options of the `LLMProxy` GRPO starts when the Trainer gave none (to reach runners on other
            machines): a `ProxyOptions` or a dict of its fields. A Trainer's `llm_proxy=` is used as it is instead.
        on_event: called with `(kind, payload)` for "resumed", "rollouts", "update" (an update starts), "step",
            "evaluation" and "checkpoint", before the listeners of `add_event_listener` (the Trainer's progress
            display shows these events; `on_event` is for your own use of them).
        tracking: experiment tracking of the settings, every step's record and the evaluations: "tensorboard",
            "mlflow", "wandb", a list of them, `{name: options}` or a `Tracker` (`agentlightning.algorithm.tracking`);
            local files go under `output_dir` (else `runs/grpo`). None: no tracking.
        config: a GRPOConfig; keyword settings (`group_size=8`, `learning_rate=...`) override its fields.
    """

    def __init__(
        self,
        model: Union[str, Path, None] = None,
        *,
        engine: Optional[InferenceEngine] = None,
        server: Optional[InferenceServer] = None,
        server_url: Optional[str] = None,
        serving: Optional[str] = None,
        vllm: Union[VllmOptions, dict[str, Any], None] = None,
        output_dir: Union[str, Path, None] = None,
        save_final_model: bool = True,
        resume: bool = True,
        agent_match: AgentMatch = None,
        resource_name: str = "main_llm",
        balance_by: Optional[Callable[[Any], Hashable]] = None,
        on_event: Optional[EventCallback] = None,
        proxy: Union[ProxyOptions, dict[str, Any], None] = None,
        config: Optional[GRPOConfig] = None,
        tracking: TrackingOption = None,
        **settings: Any,
    ) -> None:
        self.config = GRPOConfig.from_kwargs(config, **settings)
        self.serving_choice = choose_serving(
            model,
            engine=engine,
            server=server,
            server_url=server_url,
            serving=serving,
            vllm=vllm,
            output_dir=output_dir,
        )
        self.engine = self.serving_choice.engine  # the engine that serves, once built (None: vLLM or a server by URL)
        self.output_dir = self.serving_choice.output_dir
        self.save_final_model = save_final_model
        self.final_model_path: Optional[Path] = None  # where the end of `run` saved the trained model
        # Wall seconds of this run's phases: the held-out evaluations are outside `max_minutes` (see `summary`).
        self.phase_seconds: dict[str, float] = {}
        self.resume = resume
        # one policy, or one adapter per agent: what differs between them (see trained.py)
        self.trained = trained_for(
            agent_match,
            self.config,
            server_url=server_url,
            vllm_options=self.serving_choice.vllm,
            adapter=self.get_adapter,
        )
        self.last_agent_samples: dict[str, list[Sample]] = {}  # what each agent's latest update trained on
        self.resource_name = resource_name
        if balance_by is not None and not callable(balance_by):
            raise TypeError(f"balance_by must be a callable task -> stratum, got {balance_by!r}")
        self.balance_by = balance_by
        self.proxy_options = check_proxy_options(proxy)  # the LLMProxy's keyword arguments, when GRPO starts it
        self.on_event = on_event
        self.tracking = tracking
        self._tracker: Optional[Tracker] = None
        self.step = 0
        self.skips = SkipCounts()
        self.drift = DriftCounts()  # how the run's calls joined into multi-turn sequences
        self.rollout_drift: dict[str, float] = {}  # the drift rate of every rollout that drifted (first 1,000)
        self.group_sampling = SamplingCounts()  # tasks sampled, extra tasks for informative groups, short steps
        self.tasks: Optional[TaskStream] = None  # the training tasks, from `run` on (its cursor is checkpointed)
        self.history: list[dict[str, Any]] = []
        self.evaluations: list[EvaluationReport] = []
        self.resumed_from: Optional[str] = None
        self.start_step = 0  # the step this run started from (a resumed run's checkpoint step)
        self.last_samples: list[Sample] = []  # what the latest update trained on (for inspection and tests)
        self.policy: Optional[Policy] = None
        self._endpoint: Optional[Endpoint] = None  # the serving behind the proxy, once built
        # The updates' thread; a step's update is pending until its step is counted (Ctrl-C meanwhile saves it).
        self._updates = UpdateThread()
        self._version = "base"
        self._serves_policy_weights = False  # True when the served model is known to hold the policy's weights
        self.sampling_mismatches = SamplingMismatches()
        self.health = RunHealth(self.balance_by)  # each step's health record and warnings (docs/algorithms.md)
        self._health_writer: Optional[HealthRecordWriter] = None  # the record in the store, for the dashboard
        self.sampler_correction = False  # truncated importance sampling on (decided in _build, see sampler_gap)

    @property
    def serving(self) -> str:
        """What samples: "local" (our inference server, in this process or by `server_url`) or "vllm"."""
        return self.serving_choice.kind

    @property
    def agents(self) -> Optional[dict[str, str]]:
        """`{adapter name: pattern}` when one adapter per agent trains, else None."""
        return self.trained.agents

    @property
    def agent_match(self) -> Optional[str]:
        """The pattern of the agents whose calls the one policy trains on (None: every call, or several agents)."""
        return self.trained.agent_match

    @property
    def agent_evaluations(self) -> dict[str, dict[str, Optional[float]]]:
        """Each evaluation's mean reward per agent (label -> agent -> mean reward; several agents only)."""
        return self.trained.evaluations

    @property
    def agent_policies(self) -> Optional[AgentPolicies]:
        """The agents' adapters (several agents, once built)."""
        return self.trained.policies

    # ------------------------------------------------------------------------------------------------ events
    def _emit(self, kind: str, **payload: Any) -> None:
        self._tracker = track_or_stop(self._tracker, kind, payload, self.step)  # tracking never stops training
        if self.on_event is not None:
            self._notify(self.on_event, kind, payload)  # a broken callback must not stop training
        self.emit_event(kind, payload)  # the listeners (the Trainer's progress display), each failure logged

    # --------------------------------------------------------------------------------------------- set-up
    def _build(self) -> Endpoint:
        import torch

        torch.manual_seed(self.config.seed)  # LoRA's initialisation (a resumed run restores the RNG state later)
        logger.info(
            "GRPO learning rate %g%s",
            self.config.effective_learning_rate,
            "" if self.config.learning_rate is not None else " (the default for a LoRA run or a full fine-tune)",
        )
        built = build_policy_and_serving(self.config, self.serving_choice, self.trained, step=self.step)
        self.policy, self._serves_policy_weights = built.policy, built.serves_policy_weights
        self._endpoint = Endpoint(built.serving, self.agents)
        if built.engine is not None:
            self.engine = built.engine
        if self.config.kl_coef > 0:
            self.policy.keep_reference()
        self.sampler_correction = choose_correction(
            self.config.sampler.sampler_correction, built.serving, getattr(self.policy, "compute_dtype", None)
        )
        release_free_memory()  # what loading and de-quantizing the model files used on the way
        built.serving.start()
        return self._endpoint

    def _publish_weights(self) -> None:
        """Serve the current weights (every agent's adapter, with several agents) as version `self._version`."""
        assert self._endpoint is not None and self.policy is not None
        self.trained.publish(self._endpoint.serving, self.policy, self._version)

    def _collector(self) -> RolloutCollector:
        """How this run enqueues and reads rollouts (`rollouts/collector.py`), once the model is served."""
        assert self._endpoint is not None
        writer = self._health_writer

        def progress(mode: RolloutMode, done: int, total: int) -> None:
            self._emit("rollouts", step=self.step + 1, mode=mode, done=done, total=total)

        pointer = {POINTER_KEY: writer.rollout_id} if writer is not None and writer.rollout_id is not None else {}
        return RolloutCollector(
            self.get_store(),
            self._endpoint,
            self.trained,
            self.config,
            resource_name=self.resource_name,
            initial_resources=self.get_initial_resources(),
            skips=self.skips,
            on_progress=progress,
            meta=pointer,
        )

    def _try_resume(self) -> None:
        assert self.policy is not None and self._endpoint is not None
        if self.output_dir is None or not self.resume:
            return
        latest = find_latest(self.output_dir)
        if latest is None:
            return
        loaded = load_checkpoint(latest, self.policy)
        restore_run_state(self, loaded.step, loaded.state)
        self.trained.restore(loaded.state)
        self._version = f"step-{self.step}"
        self._publish_weights()
        self._serves_policy_weights = True
        if self.engine is not None and self.serving_choice.server_url is None:
            self.engine.seed_sampling(f"{self.config.seed}:{self.step}")
        self.resumed_from = str(latest)
        logger.info("GRPO resumed from %s (step %d)", latest, self.step)
        self._emit("resumed", step=self.step, path=str(latest))

    # ---------------------------------------------------------------------------------------------- running
    async def run(
        self, train_dataset: Optional[Dataset[Any]] = None, val_dataset: Optional[Dataset[Any]] = None
    ) -> None:
        """Train on `train_dataset`; evaluate `val_dataset` greedily before and after (if given); with `output_dir`,
        write the run's outputs at the end (also when interrupted). `max_minutes` bounds the training steps only: the
        evaluations before and after come on top (`summary()["seconds"]` records each phase)."""
        if train_dataset is None or len(train_dataset) == 0:
            raise ValueError("GRPO needs a non-empty train_dataset")
        # before anything loads: a balance_by that fails on a task stops here
        strata = stratify(train_dataset, self.balance_by, self.config.seed) if self.balance_by is not None else None
        self.tasks = TaskStream(len(train_dataset), self.config.seed, strata=strata)
        self._updates = UpdateThread()
        directory = self.output_dir if self.output_dir is not None else Path("runs") / "grpo"
        self._tracker = make_tracker(self.tracking, directory=directory, run_name=directory.name)
        if self._tracker is not None:
            self._tracker.log_params(self.config.to_dict())
        started = time.monotonic()
        self.phase_seconds = {}
        endpoint = self._build()
        try:
            self._try_resume()
            if not self._serves_policy_weights:
                # A server given by URL (or an engine next to model=) serves weights of its own: the "before"
                # evaluation and the first step must sample from the policy being trained.
                await asyncio.to_thread(self._publish_weights)
                self._serves_policy_weights = True
            await cancel_stale_rollouts(self.get_store())
            self._health_writer = HealthRecordWriter(self.get_store())
            await self._health_writer.save(self.history)
            endpoint.start_proxy(self.get_llm_proxy(), self.get_store(), self.proxy_options)
            if val_dataset is not None and len(val_dataset) and not any(e.label == "before" for e in self.evaluations):
                with timed(self.phase_seconds, "evaluation_before"):
                    await self.evaluate(val_dataset, label="before")
            with timed(self.phase_seconds, "training"):
                await self._train(train_dataset)
            if val_dataset is not None and len(val_dataset):
                with timed(self.phase_seconds, "evaluation_after"):
                    await self.evaluate(val_dataset, label="after")
                await self._health_writer.save(self.history, log_verdict(self.history, self.evaluations))
            self._finish(started)
        except (KeyboardInterrupt, asyncio.CancelledError):
            logger.warning("GRPO interrupted at step %d; saving a checkpoint before stopping", self.step)
            if self._updates.finish_pending():
                self.step += 1  # the interrupted step's update completed: its weights are what gets saved
                self.history.append({"step": self.step, "interrupted": True, "samples": len(self.last_samples)})
            self._finish(started)
            raise
        finally:
            self._shutdown()

    def summary(self) -> dict[str, Any]:
        """What summary.json holds: `training_summary` (settings, steps, timing, skips, health and verdict, history),
        the evaluations by label (`EvaluationReport.to_dict()`), `seconds` (wall seconds of this run's phases:
        `evaluation_before`, `training` (what `max_minutes` bounds), `evaluation_after`, `total`) and `final_model`
        (its folder, or None). A script may add keys of its own and write it again (`report.write_summary`)."""
        return run_summary(self)

    def _finish(self, started: float) -> None:
        """The end of a run, an interrupted one too: the last checkpoint, then the run's outputs into `output_dir`
        (see `report.write_run_outputs`; a failure there is logged, never raised: the checkpoint is written)."""
        self._checkpoint(final=True)
        self.phase_seconds["total"] = round(time.monotonic() - started, 3)
        if self.output_dir is None:
            return
        try:
            write_run_outputs(self, self.output_dir, final_model=self.save_final_model)
        except Exception as exc:
            logger.warning("GRPO could not write its outputs to %s: %r", self.output_dir, exc, exc_info=True)

    def _shutdown(self) -> None:
        self._updates.shutdown()
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None
        if self._endpoint is not None:
            self._endpoint.stop()

    async def _train(self, dataset: Dataset[Any]) -> None:
        budget = StepBudget(self.config, len(dataset))
        while budget.allows(self.step):
            await self._train_step(dataset)
            if self.step % self.config.checkpoint_every == 0:
                self._checkpoint()

    async def _train_step(self, dataset: Dataset[Any]) -> None:
        assert self.policy is not None and self._endpoint is not None
        config = self.config
        started = time.monotonic()
        rollouts = self._collector()
        resources_id = await rollouts.publish(self._version, temperature=config.temperature)
        meta = {"step": self.step + 1, "version": self._version}
        saturated = reward_saturated(self.history, config.saturation_reward, config.saturation_window)
        assert self.tasks is not None

        async def run_round(tasks: list[Any], round: int) -> tuple[list[Rollout], list[int]]:
            return await rollouts.run(tasks, "train", resources_id, config.group_size, {**meta, "round": round})

        async def read(finished: list[Rollout]) -> tuple[list[RolloutData], Optional[AgentRollouts]]:
            return await rollouts.read_training(finished, step=self.step + 1, first=self.step == self.start_step)

        sampled = await sample_groups(
            dataset,
            config,
            self.group_sampling,
            self.tasks,
            run_round,
            read,
            self.trained.build_round,
            served=ServedBy(self._endpoint.serving.model_name, base_allowed=self._version == "base"),
            extra=not saturated,
        )
        step_skips = count_skips(sampled.data)
        step_skips.add(sampled.build_skips)
        mismatches = check_sampling(self.step + 1, sampled.data, config.temperature, self.sampling_mismatches)
        built = sampled.built
        self.last_agent_samples = {agent: part.samples for agent, part in sampled.per_agent.items()}
        samples = built.samples
        self.last_samples = samples

        update_seconds = swap_seconds = 0.0
        metrics: dict[str, float] = {}
        if samples:
            update_started = time.monotonic()
            update = self.trained.update(self.policy, sampled, config, self.sampler_correction)
            pending = self._updates.submit(update)
            self._emit("update", step=self.step + 1, samples=len(samples))  # after submit: Ctrl-C now waits for it
            metrics = await asyncio.wrap_future(pending)  # pending until the step is counted below
            update_seconds = time.monotonic() - update_started
            swap_started = time.monotonic()
            self._version = f"step-{self.step + 1}"
            await asyncio.to_thread(self._publish_weights)
            self._endpoint.route_to_newest()
            swap_seconds = time.monotonic() - swap_started
            release_free_memory()  # the update's activations and gradients: freed, but kept by the allocator
        else:
            step_skips.steps_without_update += 1
            log_no_update(self.step + 1, step_skips)
        self.skips.add(step_skips)
        count_drift(self.step + 1, built, self.drift, self.rollout_drift)
        self.step += 1
        self._updates.settled()
        entry = self.trained.history_entry(
            history_entry(self.step, sampled, built, step_skips, metrics), sampled, metrics
        )
        entry.update(
            step_details(
                sampled,
                mismatches,
                saturated=saturated,
                strata=self.tasks.strata,
                truncated=config.rewards.truncated,
                update_seconds=update_seconds,
                swap_seconds=swap_seconds,
                started=started,
            )
        )
        self.health.observe(entry, self.history, metrics, sampled, dataset)
        self.history.append(entry)
        if self._health_writer is not None:
            await self._health_writer.save(self.history)
        log_step(entry, built, metrics)
        self._emit("step", **entry)

    # ------------------------------------------------------------------------------------------- evaluation
    async def evaluate(self, dataset: Dataset[Any], *, label: str) -> EvaluationReport:
        """Run every task once with greedy decoding (temperature 0) against the current weights."""
        if self._endpoint is None or self._endpoint.proxy is None:
            raise RuntimeError("GRPO.evaluate runs inside run(), after the model is served")
        tasks = [dataset[i] for i in range(len(dataset))]
        (data, read), positions = await self._collector().run_greedy(tasks, self._version, label)
        self.trained.evaluated(label, read)
        tokenizer = self.policy.tokenizer if self.policy is not None else None
        report = evaluation_report(label, self.step, tasks, data, positions, tokenizer)
        self.evaluations = [e for e in self.evaluations if e.label != label] + [report]
        log_evaluation(report)
        self._emit("evaluation", **report.to_dict())
        return report

    # ------------------------------------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        """What a checkpoint records besides the weights (and what summaries are built from; `reporting/run_state.py`
        and, with several agents, theirs)."""
        return {**run_state(self), **self.trained.state()}

    def _checkpoint(self, *, final: bool = False) -> None:
        if self.output_dir is None or self.policy is None:
            return
        path = save_checkpoint(self.output_dir, self.policy, self.step, self.state(), keep=self.config.keep_checkpoints)
        logger.info("GRPO checkpoint written: %s", path)
        self._emit("checkpoint", step=self.step, path=str(path), final=final)
