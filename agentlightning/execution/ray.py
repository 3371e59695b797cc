"""`RayExecutionStrategy` ("ray"): runners as Ray actors anywhere on a Ray cluster; the algorithm in the driver.

The driver serves the store over HTTP (`LightningStoreServer`); each actor runs one runner against it by URL with a
`LightningStoreClient`. The driver watches the actors: one that dies has its in-flight attempt released and is
replaced (a few times at most). Needs the `ray` extra (`pip install 'agentlightning[ray]'`).

On a multi-machine cluster the store server must be reachable from the other nodes: bind `server_host="0.0.0.0"`
with an API key (`AGL_STORE_API_KEY`, which the actors receive through their runtime environment).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from .base import AlgorithmBundle, ExecutionStrategy, RunnerBundle
from .events import ThreadingEvent
from .loop import run_interruptibly, run_supervised
from .reaper import release_attempts_of_process

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["RayExecutionStrategy"]

logger = logging.getLogger(__name__)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("The 'ray' execution strategy needs Ray: pip install 'agentlightning[ray]'") from exc
    return ray


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
            await store.close()
        return worker_id

    def stop(self) -> None:
        self._stop.set()


class RayExecutionStrategy(ExecutionStrategy):
    """Runners as Ray actors (see the module docstring).

    Args:
        n_runners: runner actors.
        address: Ray cluster address for `ray.init` (None: the running cluster, or a new local one).
        ray_init_kwargs: more arguments for `ray.init` (used only when this strategy starts Ray).
        actor_options: options for each actor (`num_cpus`, `resources`, ...; default `num_cpus=0.5`).
        server_host: address of the store server (127.0.0.1 by default; use 0.0.0.0 with an API key on a cluster).
        server_port: port of the store server (0: a free one).
        max_runner_restarts: times one runner actor is replaced after dying.
        graceful_timeout: seconds the actors get to stop after the run, before they are killed.
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
    ) -> None:
        if isinstance(n_runners, bool) or not isinstance(n_runners, int) or n_runners < 1:
            raise ValueError(f"n_runners must be a positive integer, got {n_runners!r}")
        self.n_runners = n_runners
        self.address = address
        self.ray_init_kwargs = dict(ray_init_kwargs or {})
        self.actor_options = dict(actor_options or {"num_cpus": 0.5})
        self.server_host = server_host
        self.server_port = server_port
        self.max_runner_restarts = max_runner_restarts
        self.graceful_timeout = graceful_timeout

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

    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        ray = _import_ray()
        from ray.cloudpickle.cloudpickle_fast import dumps  # pickles objects of the main script by value

        from agentlightning.store.http.server.server import LightningStoreServer

        try:
            payload = dumps(runner)
        except Exception as exc:
            raise TypeError(
                f"The runner bundle (agent, runner, tracer, hooks) cannot be sent to Ray actors: {exc}"
            ) from exc
        started_ray = self._init_ray(ray)
        stop = ThreadingEvent()
        server = LightningStoreServer(store, host=self.server_host, port=self.server_port)
        actors = _ActorPool(ray, self, payload, store)
        try:
            run_interruptibly(server.start())
            actors.url = server.endpoint
            actors.start()
            run_interruptibly(run_supervised(algorithm, server, stop, actors))
        except KeyboardInterrupt:
            logger.warning("Interrupted (Ctrl-C): stopping the algorithm and the runner actors")
        finally:
            stop.set()
            actors.shutdown()
            try:
                run_interruptibly(server.stop())
            finally:
                if started_ray:
                    ray.shutdown()


class _ActorPool:
    """The runner actors of one run: start, watch (replace the dead), stop."""

    def __init__(self, ray: Any, strategy: RayExecutionStrategy, payload: bytes, store: LightningStore) -> None:
        self.ray = ray
        self.strategy = strategy
        self.payload = payload
        self.store = store
        self.url = ""
        self.actor_class = ray.remote(RunnerActor)
        self.actors: dict[int, Any] = {}
        self.refs: dict[int, Any] = {}
        self.where: dict[int, tuple[str, int]] = {}
        self.restarts: dict[int, int] = {}
        self.fatal: Optional[str] = None
        self._closing = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _spawn(self, worker_id: int) -> None:
        actor = self.actor_class.options(name=None, **self.strategy.actor_options).remote()
        self.actors[worker_id] = actor
        self.where[worker_id] = self.ray.get(actor.where.remote())
        level = logging.getLogger("agentlightning").getEffectiveLevel()
        api_key = os.environ.get("AGL_STORE_API_KEY") or None
        self.refs[worker_id] = actor.run.remote(self.payload, worker_id, self.url, api_key, level)

    def start(self) -> None:
        for worker_id in range(self.strategy.n_runners):
            self._spawn(worker_id)
        logger.info("Started %d runner actor(s) against %s", len(self.actors), self.url)

    def supervise(self, on_fatal: Any) -> None:
        def loop() -> None:
            while not self._closing.is_set():
                pending = list(self.refs.values())
                if not pending:
                    self._closing.wait(0.5)
                    continue
                ready, _ = self.ray.wait(pending, num_returns=1, timeout=0.5)
                if self._closing.is_set():
                    return
                for ref in ready:
                    message = self._handle_finished(ref)
                    if message is not None and self.fatal is None:
                        self.fatal = message
                        on_fatal(message)
                        return

        self._thread = threading.Thread(target=loop, name="agl-ray-supervisor", daemon=True)
        self._thread.start()

    def _handle_finished(self, ref: Any) -> Optional[str]:
        worker_id = next((key for key, value in self.refs.items() if value == ref), None)
        if worker_id is None:
            return None
        del self.refs[worker_id]
        try:
            self.ray.get(ref)
            logger.info("runner actor %d finished on its own", worker_id)
            return None
        except self.ray.exceptions.RayActorError as exc:
            reason = f"runner actor {worker_id} died ({type(exc).__name__})"
        except Exception as exc:
            reason = f"runner actor {worker_id} failed: {exc!r}"
        logger.error("%s while the run goes on", reason)
        self._release(worker_id, reason)
        count = self.restarts.get(worker_id, 0)
        if count >= self.strategy.max_runner_restarts:
            logger.error("runner actor %d died %d times; it is not replaced again", worker_id, count + 1)
            return "every runner actor died" if not self.refs else None
        self.restarts[worker_id] = count + 1
        logger.warning("Replacing runner actor %d (restart %d)", worker_id, count + 1)
        self._spawn(worker_id)
        return None

    def _release(self, worker_id: int, reason: str) -> None:
        hostname, pid = self.where.get(worker_id, ("", -1))
        try:
            released = asyncio.run(release_attempts_of_process(self.store, pid=pid, hostname=hostname, reason=reason))
            if released:
                logger.warning("Released the attempts of runner actor %d: %s", worker_id, ", ".join(released))
        except Exception as exc:
            logger.warning("Could not release the attempt of %s: %r", reason, exc)

    def shutdown(self) -> None:
        self._closing.set()
        if self._thread is not None:
            self._thread.join(5.0)
        for actor in self.actors.values():
            try:
                actor.stop.remote()
            except Exception:
                pass
        pending = list(self.refs.values())
        deadline = time.monotonic() + self.strategy.graceful_timeout
        while pending and time.monotonic() < deadline:
            _, pending = self.ray.wait(pending, num_returns=len(pending), timeout=0.5)
        unfinished = {worker_id for worker_id, ref in self.refs.items() if ref in pending}
        for actor in self.actors.values():
            try:
                self.ray.kill(actor)
            except Exception:
                pass
        for worker_id in unfinished:  # killed mid-rollout: their attempts would otherwise stay "running"
            self._release(worker_id, f"runner actor {worker_id} was killed at the end of the run")
