"""`Trainer`: wires an agent, an algorithm, runners and a store together and runs them.

    trainer = agl.Trainer(algorithm=..., n_runners=4, store="sqlite:///run.db")
    trainer.fit(agent, train_dataset, val_dataset=val_dataset)

Every component (algorithm, runner, tracer, adapter, store, llm_proxy, strategy, hooks) may be given as an instance,
a class, a factory, an import string or a dict with a `type` key (see `init_utils`). The store may also be a URL
(`memory://`, `sqlite:///run.db`, `postgresql://...`, `http://host:port` for an external store server). The execution
strategy (default: client-server, runners as processes) decides where the algorithm and the runners run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from collections.abc import Sequence
from typing import Any, Optional, Union

from agentlightning.adapter.base import Adapter
from agentlightning.adapter.triplet import TracerTraceToTriplet
from agentlightning.algorithm.base import Algorithm
from agentlightning.algorithm.fast import Baseline, FastAlgorithm
from agentlightning.algorithm.patience import DEFAULT_STORE_PATIENCE, PatientStore
from agentlightning.execution.base import ExecutionStrategy
from agentlightning.execution.events import ExecutionEvent
from agentlightning.litagent.litagent import LitAgent
from agentlightning.llm_proxy import LLMProxy
from agentlightning.runner.agent import LitAgentRunner
from agentlightning.runner.base import Runner
from agentlightning.store.base import LightningStore
from agentlightning.tracer.base import Tracer
from agentlightning.types import Dataset, Hook, NamedResources, RolloutConfig

from .bundle import AgentRunnerBundle
from .datasets import check_dataset, check_items_serialisable
from .init_utils import build_component
from .progress import ProgressMode, ProgressMonitor, RunSummary, report
from .registry import ExecutionStrategyRegistry

__all__ = ["Trainer"]

logger = logging.getLogger(__name__)


def _normalise_hooks(hooks: Union[Hook, Sequence[Hook], None]) -> tuple[Hook, ...]:
    if hooks is None:
        return ()
    if isinstance(hooks, Hook):
        return (hooks,)
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Sequence):
        raise TypeError(f"hooks must be a Hook or a sequence of Hooks, got {type(hooks).__name__}")
    for hook in hooks:
        if not isinstance(hook, Hook):
            raise TypeError(f"hooks must be Hook instances, got {type(hook).__name__}")
    return tuple(hooks)


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and "://" in value


def _time_budget(algorithm: Algorithm) -> Optional[float]:
    """The algorithm's time budget in minutes, when its config has one (GRPO's `max_minutes`)."""
    minutes = getattr(getattr(algorithm, "config", None), "max_minutes", None)
    return float(minutes) if isinstance(minutes, (int, float)) and minutes > 0 else None


class Trainer:
    """Runs training: an algorithm on one side, runners executing the agent on the other, a store in between.

    Args:
        n_runners: runners (threads or processes, depending on the strategy); default 1.
        max_rollouts: each runner stops after this many rollouts.
        initial_resources: resources (LLM endpoints, prompt templates) the algorithm starts from.
        tracer: records what the agent does (default: `OtelTracer(instrument="auto")`: the LLM calls and steps of
            every installed framework the agent imports are captured, with no code change).
        adapter: turns spans into training data for the algorithm (default: `TracerTraceToTriplet()`).
        store: a LightningStore, or a store URL (default: an in-memory store).
        runner: the runner template (default: `LitAgentRunner(tracer)`).
        strategy: "cs" (default; runners as processes, the store served over HTTP), "shm" (threads), "ray", an
            import path, a dict with `type`, or an ExecutionStrategy.
        port: port of the store server of the "cs" strategy.
        algorithm: the algorithm (None: runners serve rollouts enqueued by someone else until stopped).
        llm_proxy: an LLMProxy for the run: pointed at the run's store, started for the run when it is not running
            (and stopped after it), whatever the algorithm (`dev()` and `Baseline` included), and handed to the
            algorithm.
        hooks: Hook(s) called around every rollout.
        progress: "auto" (a live panel on a terminal, log lines otherwise), "rich", "log" or "off". Besides the
            rollout counts it shows the algorithm's events (GRPO: step, reward curve, timing, health, evaluations).
        progress_interval: seconds between progress log lines (log mode; each step and evaluation is said at once).
        progress_file: also append progress snapshots, the algorithm's events and the final summary to this
            JSON-lines file.
        store_patience: seconds each store call of the algorithm waits for a store that is unreachable (a store
            server restarting) before it fails; 0 fails after the store client's own retries.
        n_workers, max_tasks, triplet_exporter, dev, daemon: 0.2 names and options, still accepted.
    """

    def __init__(
        self,
        *,
        dev: bool = False,
        n_runners: Optional[int] = None,
        max_rollouts: Optional[int] = None,
        initial_resources: Optional[NamedResources] = None,
        tracer: Any = None,
        adapter: Any = None,
        store: Any = None,
        runner: Any = None,
        strategy: Any = None,
        port: Optional[int] = None,
        algorithm: Any = None,
        llm_proxy: Any = None,
        n_workers: Optional[int] = None,
        max_tasks: Optional[int] = None,
        daemon: bool = True,
        triplet_exporter: Any = None,
        hooks: Union[Hook, Sequence[Hook], None] = None,
        progress: ProgressMode = "auto",
        progress_interval: float = 10.0,
        progress_file: Optional[str] = None,
        store_patience: float = DEFAULT_STORE_PATIENCE,
    ) -> None:
        if dev:
            warnings.warn("Trainer(dev=True) is deprecated; call trainer.dev(...) instead", DeprecationWarning, 2)
        self._dev = dev
        self.daemon = daemon
        if not daemon:
            logger.warning("Trainer(daemon=False) has no effect: runner processes are always stopped with the run")
        self.n_runners = self._resolve_n_runners(n_runners, n_workers)
        if max_tasks is not None:
            warnings.warn("max_tasks is deprecated; use max_rollouts", DeprecationWarning, stacklevel=2)
            max_rollouts = max_rollouts if max_rollouts is not None else max_tasks
        if max_rollouts is not None and (
            isinstance(max_rollouts, bool) or not isinstance(max_rollouts, int) or max_rollouts < 1
        ):
            raise ValueError(f"max_rollouts must be a positive integer or None, got {max_rollouts!r}")
        self.max_rollouts = max_rollouts
        self.progress: ProgressMode = progress
        self.progress_interval = progress_interval
        self.progress_file = progress_file
        if isinstance(store_patience, bool) or not isinstance(store_patience, (int, float)) or store_patience < 0:
            raise ValueError(f"store_patience must be a number of seconds >= 0, got {store_patience!r}")
        self.store_patience = float(store_patience)
        self.summary: Optional[RunSummary] = None

        self.tracer: Tracer = self._build_tracer(tracer)
        self.adapter: Adapter[Any, Any] = self._build_adapter(adapter, triplet_exporter)
        self.algorithm: Optional[Algorithm] = build_component(
            algorithm, expected_type=Algorithm, spec_name="algorithm", allow_none=True
        )
        self.initial_resources = initial_resources
        self._store_url: Optional[str] = store if _is_url(store) else None
        self.store: LightningStore = self._build_store(store)
        self.runner: Runner[Any] = self._build_runner(runner)
        self.strategy: ExecutionStrategy = self._build_strategy(strategy, port)
        strategy_runners = getattr(self.strategy, "n_runners", None)
        if isinstance(strategy_runners, int) and not isinstance(strategy_runners, bool) and strategy_runners > 0:
            self.n_runners = strategy_runners
        self.llm_proxy: Optional[LLMProxy] = self._build_llm_proxy(llm_proxy)
        self.hooks = _normalise_hooks(hooks)

    # ----------------------------------------------------------------------------------------- components
    @property
    def n_workers(self) -> int:
        """0.2 name of `n_runners`."""
        return self.n_runners

    @property
    def triplet_exporter(self) -> Adapter[Any, Any]:
        """0.2 name of `adapter`."""
        return self.adapter

    @staticmethod
    def _resolve_n_runners(n_runners: Optional[int], n_workers: Optional[int]) -> int:
        if n_workers is not None:
            warnings.warn("n_workers is deprecated; use n_runners", DeprecationWarning, stacklevel=3)
            if n_runners is not None and n_runners != n_workers:
                logger.warning("Both n_runners=%s and n_workers=%s given; using n_runners", n_runners, n_workers)
            elif n_runners is None:
                n_runners = n_workers
        value = 1 if n_runners is None else n_runners
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"n_runners must be a positive integer, got {value!r}")
        return value

    def _build_tracer(self, spec: Any) -> Tracer:
        def default() -> Tracer:
            from agentlightning.tracer.otel import OtelTracer

            return OtelTracer(instrument="auto")  # zero-code capture, as the reference's AgentOps default did

        tracer = build_component(spec, expected_type=Tracer, spec_name="tracer", default_factory=default)
        assert tracer is not None
        return tracer

    def _build_adapter(self, adapter: Any, triplet_exporter: Any) -> Adapter[Any, Any]:
        if triplet_exporter is not None:
            warnings.warn("triplet_exporter is deprecated; use adapter", DeprecationWarning, stacklevel=3)
            if adapter is not None:
                logger.warning("Both adapter and triplet_exporter given; using adapter")
            else:
                adapter = triplet_exporter
        built = build_component(
            adapter,
            expected_type=Adapter,
            spec_name="adapter",
            default_factory=TracerTraceToTriplet,
            dict_requires_type=False,
            dict_default_cls=TracerTraceToTriplet,
        )
        assert built is not None
        return built

    def _build_store(self, spec: Any) -> LightningStore:
        if _is_url(spec):
            from agentlightning.store.url import store_from_url

            return store_from_url(spec)

        def default() -> LightningStore:
            from agentlightning.store.memory.store import InMemoryLightningStore

            return InMemoryLightningStore()

        store = build_component(spec, expected_type=LightningStore, spec_name="store", default_factory=default)
        assert store is not None
        return store

    def _build_runner(self, spec: Any) -> Runner[Any]:
        defaults: dict[str, Any] = {"tracer": self.tracer}
        if self.max_rollouts is not None:
            defaults["max_rollouts"] = self.max_rollouts

        def default() -> Runner[Any]:
            return LitAgentRunner(tracer=self.tracer, max_rollouts=self.max_rollouts)

        runner = build_component(
            spec, expected_type=Runner, spec_name="runner", default_factory=default, optional_defaults=defaults
        )
        assert runner is not None
        return runner

    def _build_strategy(self, spec: Any, port: Optional[int]) -> ExecutionStrategy:
        from agentlightning.execution.client_server import ClientServerExecutionStrategy

        external_server = self._store_url is not None and self._store_url.startswith(("http://", "https://"))
        if isinstance(spec, ExecutionStrategy):
            if port is not None and isinstance(spec, ClientServerExecutionStrategy):
                spec.server_port = port
            return spec
        defaults: dict[str, Any] = {"n_runners": self.n_runners}
        if port is not None:
            defaults["server_port"] = port
        if external_server:
            defaults["managed_store"] = False  # the store already is a server: runners use its URL directly

        def default() -> ExecutionStrategy:
            from agentlightning.execution.client_server import ClientServerExecutionStrategy

            return ClientServerExecutionStrategy(**defaults)

        if isinstance(spec, str) and spec not in ExecutionStrategyRegistry and "." not in spec:
            raise ValueError(
                f"Unknown execution strategy {spec!r}: use one of {', '.join(sorted(ExecutionStrategyRegistry))}, "
                "an import path, or an ExecutionStrategy instance"
            )
        strategy = build_component(
            spec,
            expected_type=ExecutionStrategy,
            spec_name="strategy",
            default_factory=default,
            optional_defaults=defaults,
            registry=ExecutionStrategyRegistry,
        )
        assert strategy is not None
        return strategy

    def _build_llm_proxy(self, spec: Any) -> Optional[LLMProxy]:
        if isinstance(spec, dict):
            spec = (
                {"type": LLMProxy, "store": self.store, **spec} if "type" not in spec else {"store": self.store, **spec}
            )
        return build_component(
            spec,
            expected_type=LLMProxy,
            spec_name="llm_proxy",
            allow_none=True,
            optional_defaults={"store": self.store},
        )

    # ------------------------------------------------------------------------------------------------- runs
    def fit(
        self,
        agent: LitAgent[Any],
        train_dataset: Optional[Dataset[Any]] = None,
        *,
        val_dataset: Optional[Dataset[Any]] = None,
    ) -> None:
        """Train `agent`: run the algorithm over the datasets while the runners execute the agent.

        The summary of the run (counts, reward, failure reasons) is logged and kept in `self.summary`.
        """
        self._run(agent, train_dataset, val_dataset, self.algorithm)

    def dev(
        self,
        agent: LitAgent[Any],
        train_dataset: Optional[Dataset[Any]] = None,
        *,
        val_dataset: Optional[Dataset[Any]] = None,
        rollout_config: Optional[RolloutConfig] = None,
    ) -> None:
        """A quick developer run with a fast algorithm (the trainer's algorithm, which must be a FastAlgorithm).

        `rollout_config` (timeout, retries of each rollout) configures the default `Baseline`; with an algorithm of
        your own, set it there (`Baseline(rollout_config=...)`).
        """
        if rollout_config is not None and self.algorithm is not None:
            raise ValueError(
                f"rollout_config configures the default Baseline, but this trainer has its own algorithm "
                f"({type(self.algorithm).__name__}): give it the config instead, e.g. Baseline(rollout_config=...)"
            )
        algorithm = self.algorithm if self.algorithm is not None else Baseline(rollout_config=rollout_config)
        if not isinstance(algorithm, FastAlgorithm):
            raise TypeError(
                f"Trainer.dev() needs a FastAlgorithm (quick to run, no training hardware); got "
                f"{type(algorithm).__name__}. Use fit() for full training."
            )
        self._run(agent, train_dataset, val_dataset, algorithm)

    def _check_inputs(
        self, agent: Any, train_dataset: Any, val_dataset: Any
    ) -> tuple[Optional[Dataset[Any]], Optional[Dataset[Any]]]:
        if isinstance(train_dataset, str):
            raise ValueError(
                "Trainer.fit(agent, '<url>') is the v0.1 client/server protocol, which this version does not support;"
                " pass a dataset and an algorithm (see docs/compatibility.md)"
            )
        if not isinstance(agent, LitAgent):
            hint = " (decorate the function with @agl.rollout)" if callable(agent) else ""
            raise TypeError(f"agent must be a LitAgent, got {type(agent).__name__}{hint}")
        check_dataset("train_dataset", train_dataset)
        check_dataset("val_dataset", val_dataset)
        if not self._shares_memory():
            check_items_serialisable("train_dataset", train_dataset)
            check_items_serialisable("val_dataset", val_dataset)
        return train_dataset, val_dataset

    def _shares_memory(self) -> bool:
        from agentlightning.execution.shared_memory import SharedMemoryExecutionStrategy

        return (
            isinstance(self.strategy, SharedMemoryExecutionStrategy)
            and isinstance(self.store, LightningStore)
            and (type(self.store).__name__ in ("InMemoryLightningStore", "LightningStoreThreaded"))
        )

    def _run(
        self,
        agent: LitAgent[Any],
        train_dataset: Optional[Dataset[Any]],
        val_dataset: Optional[Dataset[Any]],
        algorithm: Optional[Algorithm],
    ) -> None:
        """Run the strategy. The summary is read once every runner has stopped, so it matches the store; a Ctrl-C is
        raised again (KeyboardInterrupt) after that clean-up, so code after `fit` does not run as if training had
        completed."""
        train_dataset, val_dataset = self._check_inputs(agent, train_dataset, val_dataset)
        agent.set_trainer(self)
        self.summary = None
        self._check_store()
        monitors: list[ProgressMonitor] = []
        trainer_pid = os.getpid()

        async def algorithm_bundle(store: LightningStore, event: ExecutionEvent) -> None:
            await self._algorithm_bundle(store, event, train_dataset, val_dataset, algorithm, monitors, trainer_pid)

        runner_bundle = AgentRunnerBundle(self.runner, agent, self.hooks)
        try:
            self.strategy.execute(algorithm_bundle, runner_bundle, self.store)
        finally:
            for monitor in monitors:
                self._finish(monitor)
        if getattr(self.strategy, "interrupted", False):
            raise KeyboardInterrupt

    def _check_store(self) -> None:
        """Fail in seconds, in one line naming it, when the store is a server that cannot be reached (runner-only
        roles wait for their store instead: it may start later)."""
        if getattr(self.strategy, "role", "both") == "runner" or not self.store.is_remote:
            return
        from agentlightning.execution.loop import run_interruptibly
        from agentlightning.execution.serving import check_reachable
        from agentlightning.runner.errors import StoreUnreachableError

        try:
            run_interruptibly(check_reachable(self.store))
        except StoreUnreachableError as exc:
            raise StoreUnreachableError(str(exc)) from None

    def _finish(self, monitor: ProgressMonitor) -> None:
        """Read the final state into the summary and report it (after the strategy stopped every runner)."""
        from agentlightning.execution.loop import run_interruptibly

        try:
            self.summary = run_interruptibly(monitor.stop_async())
        except KeyboardInterrupt:
            logger.warning("Interrupted again: no run summary")
            return
        report(f"Run summary: {self.summary.describe()}")

    def _start_llm_proxy(self, store: LightningStore) -> bool:
        """Point the trainer's LLM proxy at the run's store and start it when it is not running, whatever the
        algorithm (Baseline and `dev()` included: the agents' calls go through it); True when started here (it is
        then stopped after the run)."""
        proxy = self.llm_proxy
        if proxy is None:
            return False
        if proxy.get_store() is not store:
            proxy.set_store(store)  # restarts a running proxy on the new store
        if proxy.is_running():
            return False
        proxy.start()
        logger.info("LLM proxy started for the run at %s (stopped after it)", proxy.endpoint)
        return True

    async def _algorithm_bundle(
        self,
        store: LightningStore,
        event: ExecutionEvent,
        train_dataset: Optional[Dataset[Any]],
        val_dataset: Optional[Dataset[Any]],
        algorithm: Optional[Algorithm],
        monitors: Optional[list[ProgressMonitor]] = None,
        trainer_pid: Optional[int] = None,
    ) -> None:
        describe = getattr(self.strategy, "describe", lambda: {})()
        named = f"{type(algorithm).__name__} · " if algorithm is not None else ""
        monitor = ProgressMonitor(
            store,
            mode=self.progress,
            interval=1.0,
            log_interval=self.progress_interval,
            jsonl_path=self.progress_file,
            title=f"Agent Lightning · {named}{describe.get('strategy', 'run')} · {self.n_runners} runner(s)",
            adapter=self.adapter,
        )
        await monitor.start_async()
        in_trainer_process = trainer_pid is None or os.getpid() == trainer_pid
        if monitors is not None and in_trainer_process:
            monitors.append(monitor)  # finished by the Trainer once every runner has stopped
        proxy_started = False
        try:
            proxy_started = self._start_llm_proxy(store)
            if algorithm is None:
                logger.info("No algorithm: runners serve rollouts enqueued by others until stopped (Ctrl-C)")
                while not event.is_set():
                    await asyncio.sleep(0.1)
                return
            algorithm.set_trainer(self)
            # Every store call of the algorithm rides out a store that is restarting (see algorithm/patience.py).
            if self.store_patience > 0:
                patient = PatientStore(store, patience_seconds=self.store_patience)
                monitor.waiting_probe = lambda: patient.waiting_for
                algorithm.set_store(patient)
            else:
                algorithm.set_store(store)
            algorithm.set_adapter(self.adapter)
            if self.initial_resources is not None:
                algorithm.set_initial_resources(self.initial_resources)
            if self.llm_proxy is not None:
                algorithm.set_llm_proxy(self.llm_proxy)
            follows = monitor.showing  # the progress shows the algorithm's events too
            if follows:
                monitor.algorithm.minutes = _time_budget(algorithm)
                algorithm.add_event_listener(monitor.on_algorithm_event)
            try:
                if algorithm.is_async():
                    await algorithm.run(train_dataset, val_dataset)  # type: ignore[misc]
                else:
                    algorithm.run(train_dataset, val_dataset)  # blocks this loop on purpose (0.2 behaviour)
            except Exception as exc:
                logger.error("The algorithm failed: %r", exc)
                raise
            finally:
                if follows:
                    algorithm.remove_event_listener(monitor.on_algorithm_event)
        finally:
            if proxy_started and self.llm_proxy is not None and self.llm_proxy.is_running():
                self.llm_proxy.stop()
            if monitors is None or not in_trainer_process:  # another process (main_process="runner"): finish here
                self.summary = await monitor.stop_async()
                report(f"Run summary: {self.summary.describe()}")
