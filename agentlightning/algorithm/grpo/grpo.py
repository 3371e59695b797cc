"""GRPO: group-relative policy optimisation of the model an agent calls, through the real training components.

Each step: pick `tasks_per_step` training tasks and enqueue each `group_size` times (against the current resources
version: a `ProxyLLM` in front of the local inference server); wait for the rollouts; read each rollout's final
reward and its LLM calls with the exact token ids (never re-tokenized); normalise rewards within each task's group;
update the policy with the clipped policy-gradient loss; swap the new weights into the inference server in place;
publish the next resources version. Checkpoints are written every `checkpoint_every` steps, at the end and on
Ctrl-C; a run started again with the same `output_dir` continues from the last one.

This module drives the run; its parts: `schedule` (the tasks of each step, when to stop), `dispatch` (rollouts
through the store), `rollouts` (reading them), `samples` (advantages to samples), `update` (the policy step on its
own thread), `serving` (weights to the inference server), `evaluation` (greedy evaluation reports) and `checkpoint`.
With several agents (`agent_match` a list or dict), each agent trains its own LoRA adapter: `agents` and
`agent_policy`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from agentlightning.adapter.triplet import TracerTraceToTriplet, TraceToTripletBase
from agentlightning.types import Dataset, Rollout, RolloutMode
from agentlightning.utils.memory import release_free_memory

from ..base import Algorithm
from ..errors import CAPTURE_HINT, NoLLMCallsError
from .agents import (
    AgentMatch,
    AgentRollouts,
    agent_history,
    agent_resource_name,
    describe_agents,
    merge_step_samples,
    parse_agent_match,
    read_agent_rollouts,
)
from .checkpoint import find_latest, load_checkpoint, save_checkpoint
from .config import GRPOConfig
from .dispatch import cancel_stale_rollouts, run_rollouts
from .evaluation import EvaluationReport, evaluation_report
from .loss import Sample
from .rollouts import RolloutData, SkipCounts, count_skips, read_rollouts
from .samples import DriftCounts, StepSamples, build_samples
from .sampling_check import SamplingMismatches, count_mismatches
from .schedule import SamplingCounts, deadline, max_steps, tasks_at
from .vllm_serving import build_vllm_serving, check_vllm_options

if TYPE_CHECKING:
    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.inference.server import InferenceServer
    from agentlightning.llm_proxy import LLMProxy

    from .agent_policy import AgentPolicies
    from .policy import Policy
    from .serving import Serving

__all__ = ["GRPO", "EvaluationReport"]

logger = logging.getLogger(__name__)

EventCallback = Callable[[str, dict[str, Any]], None]
_NORMAL_SKIPS = frozenset({"groups_zero_variance", "steps_without_update"})
_MAX_ROLLOUT_DRIFT_KEPT = 1000


@dataclass
class SampledGroups:
    """The rollouts one step ran (over one or more sampling rounds) and what reading them cost."""

    data: list[RolloutData] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)  # position in `indices` of each rollout's task
    indices: list[int] = field(default_factory=list)  # dataset index of each task sampled
    rounds: int = 0
    rollout_seconds: float = 0.0
    adapter_seconds: float = 0.0
    agents: AgentRollouts = field(default_factory=AgentRollouts)  # each adapter's view (several agents only)


_PROXY_OPTIONS = frozenset({"bind_host", "host", "port", "api_key", "insecure", "num_retries", "request_timeout"})


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
        vllm: options of the vLLM server (`VllmServing`): `url`, `command` (default `$AGL_VLLM_COMMAND`, else
            `vllm` on the PATH), `args` (extra `vllm serve` arguments), `model_name`, `api_key`,
            `startup_timeout`, `log_path`, `env`.
        output_dir: where checkpoints, the final model and the summary go (None: no checkpoints).
        resume: continue from the last checkpoint in `output_dir`, if any.
        agent_match: regex on agent names: only LLM calls made inside matching agents are trained on (needs
            client-side spans of the calls, e.g. `OtelTracer(instrument=["openai"])`). Several agents, each with
            its own LoRA adapter on the shared base model (needs `lora_rank`): a list of agent names or a dict
            `{adapter name: pattern}`; agent X then reads its own LLM resource `X_llm` (model name X; or sends the
            header `x-agl-agent: X` with the base model's name), is trained on its own calls and rewards (see
            `agents.py`), and agents not selected keep the base model (`resource_name`).
        resource_name: the name of the LLM resource the agent reads.
        proxy: keyword arguments of the `LLMProxy` GRPO starts when the Trainer gave none, to make it reachable from
            runners on other machines: `bind_host` (e.g. "0.0.0.0"), `host` (the address they dial, advertised in the
            resource), `port`, `api_key` (required off loopback; default `$AGL_PROXY_API_KEY`). A Trainer
            `llm_proxy=` is used as it is instead.
        on_event: called with `(kind, payload)` for "resumed", "rollouts", "update" (an update starts), "step",
            "evaluation" and "checkpoint".
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
        vllm: Optional[dict[str, Any]] = None,
        output_dir: Union[str, Path, None] = None,
        resume: bool = True,
        agent_match: AgentMatch = None,
        resource_name: str = "main_llm",
        on_event: Optional[EventCallback] = None,
        proxy: Optional[dict[str, Any]] = None,
        config: Optional[GRPOConfig] = None,
        **settings: Any,
    ) -> None:
        self.config = GRPOConfig.from_kwargs(config, **settings)
        if sum(x is not None for x in (engine, server, server_url)) > 1:
            raise ValueError("Pass at most one of engine, server and server_url")
        if serving not in (None, "local", "vllm"):
            raise ValueError(f"serving must be 'local' or 'vllm', got {serving!r}")
        if serving == "vllm" and (engine is not None or server is not None or server_url is not None):
            raise ValueError("serving='vllm' samples from vLLM: pass no engine, server or server_url with it")
        if vllm is not None and serving != "vllm":
            raise ValueError("vllm= options need serving='vllm'")
        self.vllm_options = check_vllm_options(vllm or {})
        self.serving = serving or "local"
        if server_url is not None and model is None:
            raise ValueError("server_url needs model=<folder>: the trainer loads the policy from the same weights")
        if server_url is not None and output_dir is None:
            raise ValueError("server_url needs output_dir: new weights reach the server through files there")
        self.model_path = Path(model) if model is not None else None
        if self.model_path is not None and not (self.model_path / "config.json").is_file():
            raise ValueError(
                f"model={str(model)!r} is not a local Hugging Face model folder (no config.json there): GRPO trains "
                "from a folder on disk and downloads nothing; save the model there first (save_pretrained)"
            )
        self.engine = engine if engine is not None else (server.engine if server is not None else None)
        self.server = server
        self.server_url = server_url
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.resume = resume
        self.agents = parse_agent_match(agent_match)  # {adapter name: pattern} when several agents train
        self.agent_match = agent_match if isinstance(agent_match, str) else None
        if self.agents is not None and self.config.lora_rank is None:
            raise ValueError("agent_match with several agents trains one LoRA adapter per agent: set lora_rank")
        if self.agents is not None and server_url is not None:
            raise ValueError("One adapter per agent is served by the in-process engine: leave server_url out")
        if self.agents is not None and serving == "vllm":
            raise ValueError(
                "One adapter per agent is served by the in-process engine only (not yet through vLLM): "
                "leave serving='vllm' out, or train one agent with agent_match=<pattern>"
            )
        self.agent_policies: Optional[AgentPolicies] = None
        self.agent_evaluations: dict[str, dict[str, Optional[float]]] = {}  # label -> agent -> mean reward
        self.last_agent_samples: dict[str, list[Sample]] = {}
        self.resource_name = resource_name
        self.proxy_options = dict(proxy or {})
        unknown = sorted(set(self.proxy_options) - _PROXY_OPTIONS)
        if unknown:
            raise TypeError(f"Unknown GRPO proxy option(s) {unknown}; known: {sorted(_PROXY_OPTIONS)}")
        self.on_event = on_event
        self.step = 0
        self.skips = SkipCounts()
        self.drift = DriftCounts()  # how the run's calls joined into multi-turn sequences
        self.rollout_drift: dict[str, float] = {}  # the drift rate of every rollout that drifted (first 1,000)
        self.group_sampling = SamplingCounts()  # tasks sampled, extra tasks for informative groups, short steps
        self.task_cursor = 0  # position in the task stream (see schedule.tasks_at)
        self.history: list[dict[str, Any]] = []
        self.evaluations: list[EvaluationReport] = []
        self.resumed_from: Optional[str] = None
        self.start_step = 0  # the step this run started from (a resumed run's checkpoint step)
        self.last_samples: list[Sample] = []  # what the latest update trained on (for inspection and tests)
        self.policy: Optional[Policy] = None
        self._serving: Optional[Serving] = None
        self._proxy: Optional[LLMProxy] = None
        self._own_proxy = False
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="grpo-update")
        # The step's update, from its submission until its step is counted (Ctrl-C meanwhile saves it as that step).
        self._update_future: Optional[concurrent.futures.Future[dict[str, float]]] = None
        self._version = "base"
        self._serves_policy_weights = False  # True when the served model is known to hold the policy's weights
        self.sampling_mismatches = SamplingMismatches()

    # ------------------------------------------------------------------------------------------------ events
    def _emit(self, kind: str, **payload: Any) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(kind, payload)
        except Exception as exc:  # a broken progress display must not stop training
            logger.warning("GRPO on_event callback failed on %s: %r", kind, exc)

    # --------------------------------------------------------------------------------------------- set-up
    def _build(self) -> None:
        import torch

        from .policy import Policy
        from .serving import LocalServing, RemoteServing

        torch.manual_seed(self.config.seed)  # LoRA's initialisation (a resumed run restores the RNG state later)
        self._serves_policy_weights = False
        if self.serving == "vllm":
            self.policy, self._serving = build_vllm_serving(
                self.model_path, self.output_dir, self.config, self.vllm_options
            )
            self._serves_policy_weights = True  # vLLM serves the folder the policy is loaded from
        elif self.server_url is not None:
            assert self.model_path is not None and self.output_dir is not None
            self.policy = Policy.from_pretrained(self.model_path, self.config)
            self._serving = RemoteServing(self.server_url, self.output_dir / "published")
        else:
            engine = self.engine
            default_model = engine is None and self.model_path is None
            if engine is None:
                from agentlightning.inference.engine import InferenceEngine

                device = self.config.device
                dtype = "bfloat16" if self.config.precision == "bfloat16" else "float32"
                engine = (
                    InferenceEngine.from_pretrained(self.model_path, device=device, dtype=dtype)
                    if self.model_path is not None
                    else InferenceEngine.from_default(device=device, dtype=dtype)
                )
                self.engine = engine
            if self.agents is not None:
                from .agent_policy import AgentPolicies

                agents = list(self.agents)
                self.agent_policies = (
                    AgentPolicies.from_pretrained(self.model_path, self.config, agents)
                    if self.model_path is not None
                    else AgentPolicies.from_engine(engine, self.config, agents)
                )
                # Checkpoints and evaluations use what both kinds have (save_model, optimizer_state, tokenizer).
                self.policy = cast("Policy", self.agent_policies)
            elif self.model_path is not None:
                self.policy = Policy.from_pretrained(self.model_path, self.config)
            elif default_model and self.config.precision == "bfloat16":
                # The engine holds the embedded model rounded to bfloat16; the policy's float32 master weights come
                # from the file, so training starts from exactly the weights a float32 run starts from.
                from agentlightning.inference.model_files import ensure_converted

                self.policy = Policy.from_pretrained(ensure_converted(), self.config)
                self._serves_policy_weights = True  # the engine serves the same weights, rounded
            else:
                self.policy = Policy.from_engine(engine, self.config, share_base=True)
                self._serves_policy_weights = True  # the policy trains the served tensors (or a copy of them)
            engine.seed_sampling(f"{self.config.seed}:{self.step}")
            self._serving = LocalServing(engine, self.server, shared=getattr(self.policy, "shared", None))
        if self.config.kl_coef > 0:
            self.policy.keep_reference()
        release_free_memory()  # what loading and de-quantizing the model files used on the way
        self._serving.start()

    def _proxy_entry(self) -> Any:
        """The proxy's route for the agent's model name: to the served model, or the newest adapter of it."""
        assert self._serving is not None
        upstream = getattr(self._serving, "upstream_model", None) or self._serving.model_name
        return {
            "model_name": self._serving.model_name,
            "litellm_params": {"model": f"hosted_vllm/{upstream}", "api_base": self._serving.endpoint},
        }

    def _model_entries(self) -> list[Any]:
        """The proxy's model list entries: the served model (or its newest adapter), and each agent's adapter by
        its own name and by the served model's name with the header `x-agl-agent`."""
        assert self._serving is not None
        base = self._serving.model_name
        entries: list[Any] = [self._proxy_entry()]
        for agent in self.agents or {}:
            params = {"model": f"hosted_vllm/{agent}", "api_base": self._serving.endpoint}
            entries.append({"model_name": agent, "litellm_params": dict(params)})
            entries.append({"model_name": base, "agent": agent, "litellm_params": dict(params)})
        return entries

    def _route_to_newest(self) -> None:
        """After a publish that loaded new weights under a new upstream name (a vLLM adapter), route the agent's
        model name to it; requests already relayed finish where they were routed."""
        proxy = self._proxy
        if proxy is None:
            return
        entries = self._model_entries()
        if all(entry in proxy.model_list for entry in entries):
            return
        names = {entry["model_name"] for entry in entries}
        existing = [m for m in proxy.model_list if m.get("model_name") not in names]
        proxy.update_model_list([*existing, *entries], restart=False)

    def _publish_weights(self) -> None:
        """Serve the current weights (every agent's adapter, with several agents) as version `self._version`."""
        assert self._serving is not None and self.policy is not None
        if self.agent_policies is not None:
            from .agent_policy import publish_adapters

            publish_adapters(self._serving, self.agent_policies, self._version)
        else:
            self._serving.publish(self.policy, self._version)

    def _start_proxy(self) -> LLMProxy:
        from agentlightning.llm_proxy import LLMProxy

        assert self._serving is not None
        entries = self._model_entries()
        names = {entry["model_name"] for entry in entries}
        proxy = self.get_llm_proxy()
        if proxy is None:
            proxy = LLMProxy(model_list=entries, store=self.get_store(), **self.proxy_options)
            self._own_proxy = True
        elif self.proxy_options:
            raise ValueError(
                "GRPO got proxy= options and the Trainer an llm_proxy: configure one of them (the Trainer's is used "
                "as it is)"
            )
        else:
            existing = [m for m in proxy.model_list if m.get("model_name") not in names]
            proxy.update_model_list([*existing, *entries])
        if proxy.get_store() is None:
            proxy.set_store(self.get_store())
        if not proxy.is_running():
            proxy.start()
        self._proxy = proxy
        return proxy

    async def _flush_proxy(self) -> None:
        """Wait until the proxy has written every call it relayed: a rollout can finish before the proxy's span of
        its last call reaches the store, and reading its spans then would find the call without its token ids."""
        if self._proxy is None:
            return
        try:
            await self._proxy.aflush()
        except Exception as exc:
            logger.warning("The LLM proxy could not flush its spans: %r", exc)

    async def _publish_resources(self, *, temperature: float, suffix: str = "") -> str:
        assert self._proxy is not None and self._serving is not None
        resource = self._proxy.as_resource(
            model=self._serving.model_name, sampling_parameters={"temperature": temperature}
        )
        resources_id = f"grpo-{self._version}{suffix}"
        # The trainer's initial resources (a prompt template, another model) stay available to the agent.
        resources = {**(self.get_initial_resources() or {}), self.resource_name: resource}
        for agent in self.agents or {}:
            resources[agent_resource_name(agent)] = self._proxy.as_resource(
                model=agent, sampling_parameters={"temperature": temperature}
            )
        await self.get_store().update_resources(resources_id, resources)
        return resources_id

    def _adapter(self) -> Optional[TraceToTripletBase]:
        if self.agent_match is not None:
            return TracerTraceToTriplet(agent_match=self.agent_match)
        try:
            adapter = self.get_adapter()
        except ValueError:
            return None
        return adapter if isinstance(adapter, TraceToTripletBase) else None

    def _try_resume(self) -> None:
        assert self.policy is not None and self._serving is not None
        if self.output_dir is None or not self.resume:
            return
        latest = find_latest(self.output_dir)
        if latest is None:
            return
        loaded = load_checkpoint(latest, self.policy)
        self.step = self.start_step = loaded.step
        self.history = list(loaded.state.get("history", []))
        self.skips = SkipCounts(**loaded.state.get("skips", {}))
        self.drift = DriftCounts(**{k: v for k, v in loaded.state.get("drift", {}).items() if k != "rate"})
        self.rollout_drift = dict(loaded.state.get("rollout_drift", {}))
        self.group_sampling = SamplingCounts(**loaded.state.get("group_sampling", {}))
        self.task_cursor = int(loaded.state.get("task_cursor", self.step * self.config.tasks_per_step))
        self.evaluations = [
            EvaluationReport(**{k: v for k, v in e.items() if k != "n"}) for e in loaded.state.get("evaluations", [])
        ]
        self.agent_evaluations = dict(loaded.state.get("agent_evaluations", {}))
        self._version = f"step-{self.step}"
        self._publish_weights()
        self._serves_policy_weights = True
        if self.engine is not None and self.server_url is None:
            self.engine.seed_sampling(f"{self.config.seed}:{self.step}")
        self.resumed_from = str(latest)
        logger.info("GRPO resumed from %s (step %d)", latest, self.step)
        self._emit("resumed", step=self.step, path=str(latest))

    # ---------------------------------------------------------------------------------------------- running
    async def run(
        self, train_dataset: Optional[Dataset[Any]] = None, val_dataset: Optional[Dataset[Any]] = None
    ) -> None:
        """Train on `train_dataset`; evaluate `val_dataset` greedily before and after (if given)."""
        if train_dataset is None or len(train_dataset) == 0:
            raise ValueError("GRPO needs a non-empty train_dataset")
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="grpo-update")
        self._build()
        try:
            self._try_resume()
            if not self._serves_policy_weights:
                # A server given by URL (or an engine next to model=) serves weights of its own: the "before"
                # evaluation and the first step must sample from the policy being trained.
                await asyncio.to_thread(self._publish_weights)
                self._serves_policy_weights = True
            await cancel_stale_rollouts(self.get_store())
            self._start_proxy()
            if val_dataset is not None and len(val_dataset) and not any(e.label == "before" for e in self.evaluations):
                await self.evaluate(val_dataset, label="before")
            await self._train(train_dataset)
            if val_dataset is not None and len(val_dataset):
                await self.evaluate(val_dataset, label="after")
            self._checkpoint(final=True)
        except (KeyboardInterrupt, asyncio.CancelledError):
            logger.warning("GRPO interrupted at step %d; saving a checkpoint before stopping", self.step)
            if self._finish_pending_update():
                self.step += 1  # the interrupted step's update completed: its weights are what gets saved
                self.history.append({"step": self.step, "interrupted": True, "samples": len(self.last_samples)})
            self._checkpoint(final=True)
            raise
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        if self._own_proxy and self._proxy is not None and self._proxy.is_running():
            self._proxy.stop()
        if self._serving is not None:
            self._serving.stop()

    def _finish_pending_update(self) -> bool:
        """Wait for the update of the interrupted step, if any; True when it completed (its step is then counted)."""
        future, self._update_future = self._update_future, None
        if future is None:
            return False
        if not future.done():
            logger.warning("Waiting for the running update to finish so the checkpoint is consistent")
        try:
            future.result()
        except Exception as exc:
            logger.warning("The interrupted update failed: %r", exc)
            return False
        return True

    async def _train(self, dataset: Dataset[Any]) -> None:
        n = len(dataset)
        last_step = max_steps(self.config, n)
        stop_at = deadline(self.config, time.monotonic())
        while last_step is None or self.step < last_step:
            if stop_at is not None and time.monotonic() >= stop_at:
                logger.info(
                    "GRPO: the time budget (%.1f min) is used up after step %d", self.config.max_minutes, self.step
                )
                break
            await self._train_step(dataset)
            if self.step % self.config.checkpoint_every == 0:
                self._checkpoint()

    async def _run_rollouts(
        self, tasks: Sequence[Any], mode: RolloutMode, resources_id: str, repeat: int, meta: dict[str, Any]
    ) -> tuple[list[Rollout], list[int]]:
        """Enqueue `repeat` rollouts per task; return the finished rollouts and each one's task index."""

        def progress(done: int, total: int) -> None:
            self._emit("rollouts", step=self.step + 1, mode=mode, done=done, total=total)

        return await run_rollouts(
            self.get_store(),
            tasks,
            mode=mode,
            resources_id=resources_id,
            repeat=repeat,
            meta=meta,
            timeout=self.config.rollout_timeout,
            skips=self.skips,
            on_progress=progress,
        )

    async def _train_step(self, dataset: Dataset[Any]) -> None:
        assert self.policy is not None and self._serving is not None
        config = self.config
        started = time.monotonic()
        resources_id = await self._publish_resources(temperature=config.temperature)
        meta = {"step": self.step + 1, "version": self._version}
        sampled = await self._sample_groups(dataset, resources_id, meta)
        step_skips = count_skips(sampled.data)
        mismatches = self._check_sampling(sampled.data)
        per_agent: dict[str, StepSamples] = {}
        if self.agents is not None:
            per_agent = {
                agent: self._samples(sampled.agents.by_agent[agent], sampled.groups, sampled.indices, step_skips)
                for agent in self.agents
            }
            built = merge_step_samples(list(per_agent.values()))
            self.last_agent_samples = {agent: part.samples for agent, part in per_agent.items()}
        else:
            built = self._samples(sampled.data, sampled.groups, sampled.indices, step_skips)
        samples = built.samples
        self.last_samples = samples

        update_seconds = swap_seconds = 0.0
        metrics: dict[str, float] = {}
        if samples:
            update_started = time.monotonic()
            if self.agent_policies is not None:
                self._update_future = self._executor.submit(
                    _run_agent_updates, self.agent_policies, self.last_agent_samples, config
                )
            else:
                self._update_future = self._executor.submit(_run_update, self.policy, samples, config)
            self._emit("update", step=self.step + 1, samples=len(samples))  # after submit: Ctrl-C now waits for it
            metrics = await asyncio.wrap_future(self._update_future)  # kept until the step is counted below
            update_seconds = time.monotonic() - update_started
            swap_started = time.monotonic()
            self._version = f"step-{self.step + 1}"
            await asyncio.to_thread(self._publish_weights)
            self._route_to_newest()
            swap_seconds = time.monotonic() - swap_started
            release_free_memory()  # the update's activations and gradients: freed, but kept by the allocator
        else:
            step_skips.steps_without_update += 1
            # Equal rewards in every group is a normal state (a task set the policy solves, or cannot yet): INFO.
            # Anything else (failed rollouts, missing ids or rewards) is worth a warning.
            others = {k: v for k, v in step_skips.to_dict().items() if k not in _NORMAL_SKIPS}
            log = logger.warning if any(others.values()) else logger.info
            log("GRPO step %d: nothing to learn from (%s); weights unchanged", self.step + 1, _describe(step_skips))
        self.skips.add(step_skips)
        self._count_drift(built)
        self.step += 1
        self._update_future = None
        entry = self._history_entry(sampled, built, step_skips, metrics)
        if self.agents is not None:
            entry = {**entry, **agent_history(sampled.agents, per_agent, metrics)}
            entry = {k: v for k, v in entry.items() if not any(k.startswith(f"{a}.") for a in self.agents)}
        entry["sampling_mismatches"] = mismatches.to_dict()
        entry["seconds"] = {
            "rollout": round(sampled.rollout_seconds, 3),
            "adapter": round(sampled.adapter_seconds, 3),
            "update": round(update_seconds, 3),
            "weight_swap": round(swap_seconds, 3),
            "total": round(time.monotonic() - started, 3),
        }
        self.history.append(entry)
        logger.info(
            "GRPO step %d: reward %s over %d rollouts (%d tasks, %d informative groups), %d samples, drift %.2f, "
            "loss %.4f (%s)",
            self.step,
            "n/a" if entry["reward_mean"] is None else f"{entry['reward_mean']:.3f}",
            entry["rollouts"],
            len(sampled.indices),
            built.informative_groups,
            len(samples),
            built.drift.rate,
            metrics.get("loss", 0.0),
            ", ".join(f"{k} {v:.1f}s" for k, v in entry["seconds"].items()),
        )
        self._emit("step", **entry)

    async def _sample_groups(self, dataset: Dataset[Any], resources_id: str, meta: dict[str, Any]) -> SampledGroups:
        """Run groups of rollouts on fresh tasks until enough groups have varying rewards (or the step's task budget
        is spent); see `GRPOConfig.informative_groups`."""
        config = self.config
        target = config.target_informative_groups
        budget = max(config.task_budget_per_step, config.tasks_per_step)
        sampled = SampledGroups()
        count = config.tasks_per_step
        while True:
            new = tasks_at(config, len(dataset), self.task_cursor, count)
            self.task_cursor += count
            offset = len(sampled.indices)
            sampled.indices.extend(new)
            round_started = time.monotonic()
            finished, groups = await self._run_rollouts(
                [dataset[i] for i in new], "train", resources_id, config.group_size, {**meta, "round": sampled.rounds}
            )
            adapter_started = time.monotonic()
            sampled.rollout_seconds += adapter_started - round_started
            await self._flush_proxy()
            if self.agents is not None:
                read = await read_agent_rollouts(self.get_store(), finished, self.agents)
                if self.step == self.start_step:  # a pattern that selects nothing at first is a configuration error
                    read.require_calls(self.agents, self.step + 1)
                sampled.agents.extend(read)
                data = read.merged
            else:
                data = await read_rollouts(self.get_store(), finished, self._adapter(), agent_match=self.agent_match)
            self._require_llm_calls(data)
            sampled.adapter_seconds += time.monotonic() - adapter_started
            sampled.data.extend(data)
            sampled.groups.extend(group + offset for group in groups)
            sampled.rounds += 1
            missing = target - self._informative_groups(sampled)
            if missing <= 0 or len(sampled.indices) >= budget:
                break
            count = min(missing, budget - len(sampled.indices))
        self.group_sampling.steps += 1
        self.group_sampling.tasks += len(sampled.indices)
        self.group_sampling.extra_tasks += len(sampled.indices) - config.tasks_per_step
        if target and missing > 0:
            self.group_sampling.steps_short += 1
        return sampled

    def _informative_groups(self, sampled: SampledGroups) -> int:
        """Groups with varying rewards so far (with several agents: summed over the agents' own groups)."""
        config, args = self.config, (sampled.groups, sampled.indices)
        if self.agents is None:
            return build_samples(sampled.data, *args, SkipCounts(), config).informative_groups
        return sum(
            build_samples(sampled.agents.by_agent[agent], *args, SkipCounts(), config).informative_groups
            for agent in self.agents
        )

    def _count_drift(self, built: StepSamples) -> None:
        self.drift.add(built.drift)
        for rollout_id, rate in built.rollout_drift.items():
            if len(self.rollout_drift) >= _MAX_ROLLOUT_DRIFT_KEPT:
                break
            self.rollout_drift[rollout_id] = rate
        if built.drift.drifted:
            logger.warning(
                "GRPO step %d: %d of %d calls that continued a conversation did not extend its token ids "
                "(drift %.0f%%): they are trained one call at a time. Check the chat template and the server's "
                "token ids (docs/algorithms.md, 'Multi-turn samples')",
                self.step + 1,
                built.drift.drifted,
                built.drift.continuations,
                100 * built.drift.rate,
            )

    def _history_entry(
        self, sampled: SampledGroups, built: StepSamples, skips: SkipCounts, metrics: dict[str, float]
    ) -> dict[str, Any]:
        data = sampled.data
        succeeded = [d for d in data if d.rollout.status == "succeeded"]
        return {
            "step": self.step,
            "reward_mean": statistics.fmean(built.rewards) if built.rewards else None,
            "rollouts": len(data),
            "tasks": len(sampled.indices),
            "sampling_rounds": sampled.rounds,
            "informative_groups": built.informative_groups,
            "samples": len(built.samples),
            "response_tokens": sum(s.trained_tokens for s in built.samples),
            "sample_tokens": sum(s.length for s in built.samples),
            "transition_tokens": built.transition_tokens,
            "calls_per_rollout": round(sum(len(d.calls) for d in succeeded) / len(succeeded), 3) if succeeded else None,
            "drift": built.drift.to_dict(),
            "calls_from": {
                source: sum(len(d.calls) for d in data if d.source == source) for source in ("adapter", "proxy")
            },
            **{k: round(v, 6) for k, v in metrics.items()},
            "skips": skips.to_dict(),
        }

    def _require_llm_calls(self, data: list[RolloutData]) -> None:
        """Stop the run when the step's rollouts ran but none recorded an LLM call (client-side or through the
        proxy): every later step would train on nothing, without an error."""
        succeeded = sum(1 for item in data if item.rollout.status == "succeeded")
        if succeeded and not any(item.calls or item.sampling for item in data):
            raise NoLLMCallsError(
                f"GRPO step {self.step + 1}: none of the {len(data)} finished rollouts ({succeeded} succeeded) made an "
                f"LLM call through the published model {self.resource_name!r}, so there is nothing to train on. "
                + CAPTURE_HINT
            )

    def _check_sampling(self, data: list[RolloutData]) -> SamplingMismatches:
        """Count (and warn about) calls that did not sample at the configured temperature over the full vocabulary:
        their log-probabilities under the training's distribution are not those they were drawn with."""
        mismatches = count_mismatches([record for item in data for record in item.sampling], self.config.temperature)
        self.sampling_mismatches.add(mismatches)
        if mismatches.any:
            logger.warning(
                "GRPO step %d: of %d LLM calls, %d sampled at another temperature than %s, %d with top_p < 1, %d "
                "with top_k; training assumes the configured temperature over the full vocabulary: pass "
                "llm.sampling_parameters['temperature'] on and leave top_p / top_k unset",
                self.step + 1,
                mismatches.calls,
                mismatches.temperature,
                self.config.temperature,
                mismatches.top_p,
                mismatches.top_k,
            )
        return mismatches

    def _samples(
        self, data: list[RolloutData], groups: list[int], indices: list[int], skips: SkipCounts
    ) -> StepSamples:
        return build_samples(data, groups, indices, skips, self.config)

    # ------------------------------------------------------------------------------------------- evaluation
    async def evaluate(self, dataset: Dataset[Any], *, label: str) -> EvaluationReport:
        """Run every task once with greedy decoding (temperature 0) against the current weights."""
        if self._proxy is None:
            raise RuntimeError("GRPO.evaluate runs inside run(), after the model is served")
        resources_id = await self._publish_resources(temperature=0.0, suffix="-greedy")
        tasks = [dataset[i] for i in range(len(dataset))]
        finished, positions = await self._run_rollouts(
            tasks, "val", resources_id, 1, {"evaluation": label, "version": self._version}
        )
        await self._flush_proxy()
        if self.agents is not None:
            read = await read_agent_rollouts(self.get_store(), finished, self.agents)
            data = read.merged
            self.agent_evaluations[label] = {agent: read.reward_mean(agent) for agent in self.agents}
            logger.info("GRPO evaluation %r per agent: %s", label, self.agent_evaluations[label])
        else:
            data = await read_rollouts(self.get_store(), finished, self._adapter(), agent_match=self.agent_match)
        tokenizer = self.policy.tokenizer if self.policy is not None else None
        report = evaluation_report(label, self.step, tasks, data, positions, tokenizer)
        self.evaluations = [e for e in self.evaluations if e.label != label] + [report]
        logger.info(
            "GRPO evaluation %r at step %d: mean reward %s over %d tasks (%d failed, %d unfinished)",
            label,
            self.step,
            report.mean_reward,
            len(report.items),
            report.failed,
            report.unfinished,
        )
        self._emit("evaluation", **report.to_dict())
        return report

    # ------------------------------------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        """What a checkpoint records besides the weights (and what summaries are built from)."""
        return {
            "step": self.step,
            "config": self.config.to_dict(),
            "history": self.history,
            "skips": self.skips.to_dict(),
            "drift": self.drift.to_dict(),
            "rollout_drift": self.rollout_drift,
            "group_sampling": self.group_sampling.to_dict(),
            "task_cursor": self.task_cursor,
            "evaluations": [e.to_dict() for e in self.evaluations],
            "base_model": self.policy.base_model_path if self.policy is not None else None,
            **(
                {"agents": describe_agents(self.agents), "agent_evaluations": self.agent_evaluations}
                if self.agents
                else {}
            ),
        }

    def _checkpoint(self, *, final: bool = False) -> None:
        if self.output_dir is None or self.policy is None:
            return
        path = save_checkpoint(self.output_dir, self.policy, self.step, self.state(), keep=self.config.keep_checkpoints)
        logger.info("GRPO checkpoint written: %s", path)
        self._emit("checkpoint", step=self.step, path=str(path), final=final)


def _run_update(policy: Policy, samples: list[Sample], config: GRPOConfig) -> dict[str, float]:
    from .update import apply_update

    return apply_update(policy, samples, config)


def _run_agent_updates(
    policies: AgentPolicies, samples: dict[str, list[Sample]], config: GRPOConfig
) -> dict[str, float]:
    from .agent_policy import run_agent_updates

    return run_agent_updates(policies, samples, config)


def _describe(skips: SkipCounts) -> str:
    parts = [f"{name.replace('_', ' ')}: {value}" for name, value in skips.to_dict().items() if value]
    return "; ".join(parts) or "no rollouts"
