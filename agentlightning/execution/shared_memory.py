"""`SharedMemoryExecutionStrategy` ("shm"): the algorithm and the runners as threads of one process.

Every bundle runs in its own thread with its own event loop, against one store (wrapped in `LightningStoreThreaded`
when the strategy manages it). Nothing crosses a process boundary, so the agent and the datasets need not be
picklable and a debugger sees everything; the cost is that all of it shares one interpreter (the GIL).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Literal, Optional

from agentlightning.env_var import resolve_managed_store_flag
from agentlightning.runner.agent_loop import on_shared_agent_loop

from .base import AlgorithmBundle, ExecutionStrategy, RunnerBundle
from .events import ExecutionEvent, ThreadingEvent
from .loop import run_interruptibly, run_until_completed_or_canceled

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["SharedMemoryExecutionStrategy"]

logger = logging.getLogger(__name__)


class SharedMemoryExecutionStrategy(ExecutionStrategy):
    """Algorithm and runners as threads of this process.

    Args:
        n_runners: runner threads.
        main_thread: which bundle runs on the calling thread: "algorithm" (runners in background threads) or
            "runner" (one runner on the calling thread, handy in a debugger; requires `n_runners == 1`). Default:
            "runner" for one runner, "algorithm" otherwise.
        join_timeout: seconds to wait for each thread at the end.
        graceful_delay: seconds a bundle gets to finish after the stop flag is set, before it is cancelled.
        poll_interval: how often bundles check the stop flag.
        managed_store: wrap the store in `LightningStoreThreaded` (default: `AGL_MANAGED_STORE`, else true).
        shared_agent_loop: run the async agents of every runner thread on one loop per process
            (`runner/agent_loop.py`; default). Libraries that keep one async client per process (LangChain's
            `ChatOpenAI`, a module-level `AsyncOpenAI()`) need it with several runner threads. False runs each async
            agent on its runner's own loop: two cross-thread wake-ups fewer per rollout (see docs/benchmarks.md
            for what they cost), for agents that keep no such client.
    """

    alias = "shm"

    def __init__(
        self,
        n_runners: int = 1,
        main_thread: Optional[Literal["algorithm", "runner"]] = None,
        join_timeout: float = 15.0,
        graceful_delay: float = 5.0,
        poll_interval: float = 0.05,
        managed_store: Optional[bool] = None,
        shared_agent_loop: bool = True,
    ) -> None:
        if isinstance(n_runners, bool) or not isinstance(n_runners, int) or n_runners < 1:
            raise ValueError(f"n_runners must be a positive integer, got {n_runners!r}")
        if main_thread is None:
            main_thread = "runner" if n_runners == 1 else "algorithm"
        if main_thread not in ("algorithm", "runner"):
            raise ValueError(f"main_thread must be 'algorithm' or 'runner', got {main_thread!r}")
        if main_thread == "runner" and n_runners != 1:
            raise ValueError("main_thread='runner' runs one runner on the main thread: it requires n_runners=1")
        self.n_runners = n_runners
        self.main_thread = main_thread
        self.join_timeout = join_timeout
        self.graceful_delay = graceful_delay
        self.poll_interval = poll_interval
        self.managed_store = resolve_managed_store_flag(managed_store)
        if not isinstance(shared_agent_loop, bool):
            raise ValueError(f"shared_agent_loop must be True or False, got {shared_agent_loop!r}")
        self.shared_agent_loop = shared_agent_loop

    def _store(self, store: LightningStore) -> LightningStore:
        if not self.managed_store:
            return store
        from agentlightning.store.threading import LightningStoreThreaded

        return store if isinstance(store, LightningStoreThreaded) else LightningStoreThreaded(store)

    async def _run_algorithm(self, algorithm: AlgorithmBundle, store: LightningStore, stop: ExecutionEvent) -> None:
        try:
            await run_until_completed_or_canceled(
                algorithm(store, stop),
                stop,
                graceful_delay=self.graceful_delay,
                poll_interval=self.poll_interval,
                name="algorithm",
            )
        finally:
            stop.set()  # the run is over when the algorithm is (also with the runner on the main thread)

    async def _run_runner(
        self, runner: RunnerBundle, store: LightningStore, worker_id: int, stop: ExecutionEvent
    ) -> None:
        try:
            bundle = runner(store, worker_id, stop)
            await run_until_completed_or_canceled(
                on_shared_agent_loop(bundle) if self.shared_agent_loop else bundle,  # one loop for all async agents
                stop,
                graceful_delay=self.graceful_delay,
                poll_interval=self.poll_interval,
                name=f"runner-{worker_id}",
            )
        except BaseException:
            stop.set()
            raise

    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        stop = ThreadingEvent()
        shared = self._store(store)
        errors: queue.SimpleQueue[BaseException] = queue.SimpleQueue()
        self.interrupted = False

        def in_thread(target: str, worker_id: int = 0) -> None:
            try:
                if target == "algorithm":
                    run_interruptibly(self._run_algorithm(algorithm, shared, stop))
                else:
                    run_interruptibly(self._run_runner(runner, shared, worker_id, stop))
            except KeyboardInterrupt:  # raised by the bundle itself: a Ctrl-C only reaches the main thread
                logger.warning("KeyboardInterrupt in the %s thread; stopping the algorithm and the runners", target)
                self.interrupted = True
                stop.set()
            except BaseException as exc:
                logger.error("%s thread failed: %r", target if target == "algorithm" else f"runner-{worker_id}", exc)
                errors.put(exc)
                stop.set()

        threads: list[threading.Thread] = []
        try:
            if self.main_thread == "algorithm":
                for worker_id in range(self.n_runners):
                    thread = threading.Thread(
                        target=in_thread, args=("runner", worker_id), name=f"runner-{worker_id}", daemon=True
                    )
                    thread.start()
                    threads.append(thread)
                try:
                    run_interruptibly(self._run_algorithm(algorithm, shared, stop))
                finally:
                    stop.set()
            else:
                thread = threading.Thread(target=in_thread, args=("algorithm",), name="algorithm", daemon=True)
                thread.start()
                threads.append(thread)
                run_interruptibly(self._run_runner(runner, shared, 0, stop))
        except KeyboardInterrupt:
            logger.warning("KeyboardInterrupt received on main thread; stopping the algorithm and the runners")
            self.interrupted = True
            stop.set()
        except BaseException:
            stop.set()
            raise
        finally:
            self._join(threads, stop)
        if not errors.empty():
            raise errors.get()

    def _join(self, threads: list[threading.Thread], stop: ExecutionEvent) -> None:
        for thread in threads:
            try:
                thread.join(self.join_timeout)
            except KeyboardInterrupt:
                stop.set()
                logger.warning("Interrupted again while waiting for %s; not waiting any longer", thread.name)
                return
            if thread.is_alive():
                logger.error("Thread %s did not stop within %.1f s", thread.name, self.join_timeout)
