"""`RayExecutionStrategy` ("ray"): runners as Ray actors anywhere on a Ray cluster; the algorithm in the driver.

The driver serves the store over HTTP (`LightningStoreServer`); each actor runs one runner against it by URL with a
`LightningStoreClient`. The actors are watched by the same supervisor as runner processes (`supervisor.py`): one that
dies has its in-flight attempt released and is replaced (a few times at most); one that Ray cannot place within
`start_timeout` seconds (not enough CPUs, a custom resource no node has) stops the run with a message naming it and
what it asked for. Needs the `ray` extra (`pip install 'agentlightning[ray]'`).

On a multi-machine cluster the store server must be reachable from the other nodes: bind `server_host="0.0.0.0"`
with an API key (`AGL_STORE_API_KEY`, which the actors receive through their runtime environment). The actors are
then given the driver node's address (as Ray knows it), or `advertise_host` when set, never the loopback address.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .base import AlgorithmBundle, ExecutionStrategy, RunnerBundle
from .events import ThreadingEvent
from .loop import run_interruptibly, run_supervised
from .serving import serve_store
from .supervisor import Supervisor, WorkerExit

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["RayExecutionStrategy", "advertised_url"]

logger = logging.getLogger(__name__)

_WILDCARD_HOSTS = ("0.0.0.0", "", "::", "[::]")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("The 'ray' execution strategy needs Ray: pip install 'agentlightning[ray]'") from exc
    return ray


def advertised_url(bind_host: str, port: int, node_address: str, advertise_host: Optional[str] = None) -> str:
    """The store URL given to the actors: `advertise_host` when set; for a wildcard bind (0.0.0.0, ::) the driver
    node's address, which other nodes can reach; else the bound host itself."""
    host = advertise_host or (node_address if bind_host in _WILDCARD_HOSTS else bind_host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


class RunnerActor:
    """One runner inside a Ray actor (wrapped with `ray.remote` by the strategy)."""

    def __init__(self) -> None:
        self._stop = ThreadingEvent()

    def where(self) -> tuple[str, int]:
        """(hostname, pid) of the actor's process."""
        return socket.gethostname(), os.getpid()

    async def run(self, payload: bytes, worker_id: int, url: str, api_key: Optional[str], log_level: int) -> int:
        import pickle

        from agentlightning.logging import setup
        from agentlightning.store.http.client.client import LightningStoreClient

        if not logging.getLogger("agentlightning").handlers:
            setup(log_level, color=False)
        bundle = pickle.loads(payload)
        store = LightningStoreClient(url, api_key=api_key)
        try:
            await bundle(store, worker_id, self._stop)
        finally:
            try:
                await store.close()
            except Exception as exc:
                logger.warning("runner actor %d: closing its store client failed: %r", worker_id, exc)
        return worker_id

    def stop(self) -> None:
        self._stop.set()


@dataclass
class RunnerActorHandle:
    """One runner actor: its placement probe, its run, and what is known about it."""

    worker_id: int
    actor: Any
    where_ref: Any
    run_ref: Any
    launched_at: float
    location: Optional[tuple[str, int]] = None
    ended: Optional[WorkerExit] = None


class ActorLauncher:
    """Starts runner actors (see `supervisor.WorkerLauncher`)."""

    kind = "runner actor"

    def __init__(self, ray: Any, payload: bytes, options: dict[str, Any], start_timeout: float) -> None:
        self.ray = ray
        self.payload = payload
        self.options = options
        self.start_timeout = start_timeout
        self.url = ""
        self.actor_class = ray.remote(RunnerActor)
        self._placed = 0
        self._last_progress = time.monotonic()
        """When an actor was last launched or was seen running: actors still waiting `start_timeout` seconds after
        that cannot be placed (a slow start of the others on a loaded machine is progress, not a failure)."""

    def launch(self, worker_id: int) -> RunnerActorHandle:
        actor = self.actor_class.options(**self.options).remote()
        level = logging.getLogger("agentlightning").getEffectiveLevel()
        api_key = os.environ.get("AGL_STORE_API_KEY") or None
        where_ref = actor.where.remote()
        run_ref = actor.run.remote(self.payload, worker_id, self.url, api_key, level)
        self._last_progress = time.monotonic()
        return RunnerActorHandle(worker_id, actor, where_ref, run_ref, self._last_progress)

    def wait(self, handles: Sequence[RunnerActorHandle], timeout: float) -> None:
        self.ray.wait([handle.run_ref for handle in handles], num_returns=1, timeout=timeout)

    def _ready(self, ref: Any) -> bool:
        ready, _ = self.ray.wait([ref], num_returns=1, timeout=0)
        return bool(ready)

    def location(self, handle: RunnerActorHandle) -> Optional[tuple[str, int]]:
        if handle.location is None and self._ready(handle.where_ref):
            try:
                hostname, pid = self.ray.get(handle.where_ref)
                handle.location = (str(hostname), int(pid))
                self._placed += 1
                self._last_progress = time.monotonic()
            except Exception:
                return None
        return handle.location

    def exit_of(self, handle: RunnerActorHandle) -> Optional[WorkerExit]:
        if handle.ended is not None:
            return handle.ended
        placed = self.location(handle) is not None
        if self._ready(handle.run_ref):
            handle.ended = self._result_of(handle, placed)
        elif not placed and time.monotonic() - self._last_progress > self.start_timeout:
            handle.ended = WorkerExit(
                "not placed", started=False, fatal=True, message=self.placement_failure(handle.worker_id)
            )
        return handle.ended

    def _result_of(self, handle: RunnerActorHandle, placed: bool) -> WorkerExit:
        from agentlightning.runner.errors import StoreUnreachableError

        try:
            self.ray.get(handle.run_ref)
        except self.ray.exceptions.RayActorError as exc:
            return WorkerExit(f"{type(exc).__name__} (the actor's process died)", started=placed)
        except StoreUnreachableError as exc:  # Ray raises the task's error as an instance of its own class too
            return WorkerExit(f"{type(exc).__name__}: {exc}", fatal=True, store_unreachable=True)
        except Exception as exc:
            return WorkerExit(f"an error: {exc!r}".splitlines()[0], started=placed)
        return WorkerExit("its runner finished", ok=True)

    def placement_failure(self, worker_id: int) -> str:
        """Why actor `worker_id` is still not running: what it asks for and what the cluster has."""
        asked = {key: value for key, value in self.options.items() if key in ("num_cpus", "num_gpus", "memory")}
        asked.update(self.options.get("resources") or {})
        try:
            total = _schedulable(self.ray.cluster_resources())
            available = _schedulable(self.ray.available_resources(), list(total))
        except Exception as exc:  # the cluster itself may be the problem
            available, total = {"unknown": repr(exc)}, {}
        return (
            f"runner actor {worker_id} could not be placed: no runner actor started for {self.start_timeout:g} s "
            f"and it is still waiting. Each runner actor asks for {asked or 'the default resources'}; the cluster "
            f"has {available} free of {total}, with {self._placed} runner actor(s) running. Lower actor_options "
            "(e.g. num_cpus), use fewer runners, or add nodes (RayExecutionStrategy(start_timeout=...) sets how "
            "long to wait)."
        )

    def name(self, handle: RunnerActorHandle) -> str:
        return f"runner-{handle.worker_id}"

    def not_started_hint(self) -> str:
        return "See the actor's error above (Ray prints the actors' output with log_to_driver)."


def _schedulable(resources: dict[str, Any], keys: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """CPU, GPU and custom resources (not memory, node or accelerator labels), rounded; `keys` are always shown."""
    shown = {
        key: round(value, 2) if isinstance(value, float) else value
        for key, value in sorted(resources.items())
        if key not in ("memory", "object_store_memory") and not key.startswith(("node:", "accelerator_type:"))
    }
    for key in keys or ():
        shown.setdefault(key, 0)
    return shown


class RayExecutionStrategy(ExecutionStrategy):
    """Runners as Ray actors (see the module docstring).

    Args:
        n_runners: runner actors.
        address: Ray cluster address for `ray.init` (None: the running cluster, or a new local one).
        ray_init_kwargs: more arguments for `ray.init` (used only when this strategy starts Ray).
        actor_options: options for each actor (`num_cpus`, `resources`, ...; default `num_cpus=0.5`).
        server_host: address the store server binds (127.0.0.1 by default; 0.0.0.0 with an API key on a cluster).
        server_port: port of the store server (0: a free one).
        max_runner_restarts: times one runner actor is replaced after dying.
        graceful_timeout: seconds the actors get to stop after the run, before they are killed.
        advertise_host: the address the actors dial (default: the driver node's address for a wildcard bind).
        start_timeout: seconds an actor may wait for Ray to place it before the run stops.
    """

    alias = "ray"

    def __init__(
        self,
        n_runners: int = 1,
        *,
        address: Optional[str] = None,
        ray_init_kwargs: Optional[dict[str, Any]] = None,
        actor_options: Optional[dict[str, Any]] = None,
        server_host: str = "127.0.0.1",
        server_port: int = 0,
        max_runner_restarts: int = 3,
        graceful_timeout: float = 10.0,
        advertise_host: Optional[str] = None,
        start_timeout: float = 120.0,
    ) -> None:
        if isinstance(n_runners, bool) or not isinstance(n_runners, int) or n_runners < 1:
            raise ValueError(f"n_runners must be a positive integer, got {n_runners!r}")
        if start_timeout <= 0:
            raise ValueError(f"start_timeout must be positive, got {start_timeout!r}")
        self.n_runners = n_runners
        self.address = address
        self.ray_init_kwargs = dict(ray_init_kwargs or {})
        self.actor_options = dict(actor_options or {"num_cpus": 0.5})
        self.server_host = server_host
        self.server_port = server_port
        self.max_runner_restarts = max_runner_restarts
        self.graceful_timeout = graceful_timeout
        self.advertise_host = advertise_host
        self.start_timeout = start_timeout
        self.interrupted = False
        self.actor_store_url: Optional[str] = None
        """The store URL the actors of the last run were given."""

    def _init_ray(self, ray: Any) -> bool:
        """Connect to (or start) Ray; True when this strategy started it (and must shut it down)."""
        if ray.is_initialized():
            return False
        kwargs = dict(self.ray_init_kwargs)
        kwargs.setdefault("address", self.address)
        kwargs.setdefault("log_to_driver", True)
        runtime_env = dict(kwargs.pop("runtime_env", None) or {})
        env_vars = dict(runtime_env.get("env_vars", {}))
        # Local actors import the agent the way the driver does.
        env_vars.setdefault("PYTHONPATH", os.pathsep.join(path for path in sys.path if path))
        if os.environ.get("AGL_STORE_API_KEY"):
            env_vars.setdefault("AGL_STORE_API_KEY", os.environ["AGL_STORE_API_KEY"])
        runtime_env["env_vars"] = env_vars
        ray.init(runtime_env=runtime_env, **kwargs)
        return True

    def _actor_url(self, ray: Any, port: int) -> str:
        node_address = ""
        if self.advertise_host is None and self.server_host in _WILDCARD_HOSTS:
            node_address = ray.util.get_node_ip_address()
        return advertised_url(self.server_host, port, node_address, self.advertise_host)

    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        ray = _import_ray()
        from ray.cloudpickle.cloudpickle_fast import dumps  # pickles objects of the main script by value

        try:
            payload = dumps(runner)
        except Exception as exc:
            raise TypeError(
                f"The runner bundle (agent, runner, tracer, hooks) cannot be sent to Ray actors: {exc}"
            ) from exc
        self.interrupted = False
        started_ray = self._init_ray(ray)
        stop = ThreadingEvent()
        server = serve_store(store, host=self.server_host, port=self.server_port)
        launcher = ActorLauncher(ray, payload, self.actor_options, self.start_timeout)
        actors = RayActorGroup(launcher, range(self.n_runners), reaper_store=store, strategy=self)
        try:
            run_interruptibly(server.start())
            launcher.url = self.actor_store_url = self._actor_url(ray, server.port)
            actors.start()
            logger.info("Runner actors reach the store at %s", launcher.url)
            run_interruptibly(run_supervised(algorithm, server, stop, actors))
        except KeyboardInterrupt:
            self.interrupted = True
            logger.warning("Interrupted (Ctrl-C): stopping the algorithm and the runner actors")
        finally:
            stop.set()
            actors.shutdown()
            try:
                run_interruptibly(server.stop())
            finally:
                if started_ray:
                    ray.shutdown()


class RayActorGroup(Supervisor[RunnerActorHandle]):
    """The runner actors of one run: supervised while the run goes on, then stopped and killed."""

    def __init__(
        self,
        launcher: ActorLauncher,
        worker_ids: Sequence[int],
        *,
        reaper_store: LightningStore,
        strategy: RayExecutionStrategy,
    ) -> None:
        super().__init__(launcher, worker_ids, reaper_store=reaper_store, max_restarts=strategy.max_runner_restarts)
        self._actors = launcher
        self.graceful_timeout = strategy.graceful_timeout

    def shutdown(self) -> None:
        """Ask every actor to stop, wait `graceful_timeout`, kill them all, release the attempts of the unfinished."""
        self.close()
        handles = self.handles
        ray = self._actors.ray
        for handle in handles:
            try:
                handle.actor.stop.remote()
            except Exception:
                pass
        pending = [handle.run_ref for handle in handles]
        deadline = time.monotonic() + self.graceful_timeout
        while pending and time.monotonic() < deadline:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
        unfinished = [handle for handle in handles if handle.run_ref in pending]
        locations = {handle.worker_id: self._actors.location(handle) for handle in unfinished}
        if unfinished:
            logger.warning(
                "Runner actors did not stop within %g s after the run and are killed: %s",
                self.graceful_timeout,
                ", ".join(self._actors.name(handle) for handle in unfinished),
            )
        for handle in handles:
            try:
                ray.kill(handle.actor)
            except Exception:
                pass
        for handle in unfinished:  # killed mid-rollout: their attempts would otherwise stay "running"
            self.release(
                locations[handle.worker_id], f"runner actor {handle.worker_id} was killed at the end of the run"
            )
