"""`LitAgentRunner`: claims rollouts from a store and runs a `LitAgent` on them, one at a time.

One loop: claim (`dequeue_rollout(worker_id=...)`) -> resources (cached per id) -> the tracer's trace context ->
the agent (sync agents on a worker thread, with the rollout's timeout) -> store the result's spans -> set the
attempt's status, with the reward, duration and any failure reason in its metadata. Heartbeats run on a timer beside
the loop (`heartbeat.py`). What a result means and what to record are plain functions (`results.py`); writing it
to the store is `recording.py`; store calls that ride out an outage or a stop are `store_calls.py`.

The runner never dies because an agent misbehaved: exceptions (BaseExceptions such as KeyboardInterrupt included),
timeouts, `sys.exit`, garbage results and output floods fail the attempt with a readable reason and the loop goes
on; only a stop of the runner itself ends it. A store that cannot be reached at start is waited for
(`connect_timeout`); a store that goes away later is ridden out (an attempt's store calls for at most
`store_retry_timeout`), and so is a server error (a 500) on a claim or a registration; on an attempt's store call it
is retried for a while (`store_calls.SERVER_ERROR_RETRY_SECONDS`). A final status the store does not accept by then
is kept and written before the next claim. Other store errors (4xx) fail the attempt, or, on a claim, end the runner.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar

from agentlightning.emitter.reward import find_final_reward
from agentlightning.litagent.litagent import LitAgent, running_rollout
from agentlightning.types import AttemptedRollout, Hook, NamedResources, Rollout, RolloutMode

from .base import Runner
from .errors import StoreUnreachableError, describe_store, is_retryable_store_error, is_server_error
from .guard import one_at_a_time
from .heartbeat import Heartbeat, HeartbeatLaunchMode, RunningAttempt, launch_mode_for
from .invoke import AgentInvoker
from .output import output_budget, output_guard
from .recording import UnwrittenStatus, finish_attempt, store_result, write_unwritten
from .resources import ResourcesCache, StoreCall
from .results import (
    SUCCEEDED,
    AgentTimeout,
    AttemptOutcome,
    NormalizedResult,
    RunnerInterrupted,
    StoreDeclaredTimeout,
    log_attempt_failure,
    normalize_result,
    outcome_of_exception,
)
from .store_calls import is_set, register_worker, release_lost_claim, retry_store_call, sleep_unless_stopped
from .timing import next_poll_delay, server_clock_offset

if TYPE_CHECKING:
    from agentlightning.execution.events import ExecutionEvent
    from agentlightning.store.base import LightningStore
    from agentlightning.tracer.base import Tracer

__all__ = ["LitAgentRunner", "StoreUnreachableError"]

logger = logging.getLogger(__name__)

STOPPED_REPORT_TIMEOUT = 2.0
"""Seconds a stopping runner spends telling the store that it stopped."""

T_task = TypeVar("T_task")
R = TypeVar("R")


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


class LitAgentRunner(Runner[T_task]):
    """Runs a LitAgent on rollouts claimed from a store.

    Args:
        tracer: records the agent's spans (default: an `OtelTracer`).
        max_rollouts: stop `iter()` after this many rollouts (None: until stopped).
        poll_interval: longest wait between two polls of an empty queue; polling starts at `min_poll_interval` and
            doubles while the queue stays empty.
        heartbeat_interval: seconds between worker/attempt heartbeats.
        interval_jitter: heartbeats move by up to this many seconds either way (spreads the load of many runners).
        heartbeat_launch_mode: "thread" (default: on the process's I/O loop thread, so heartbeats go on while an
            agent blocks the runner's loop) or "asyncio" (a task on the runner's loop).
        heartbeat_include_gpu: add GPU figures to the worker heartbeats.
        connect_timeout: how long `iter()` waits for an unreachable store at start before failing.
        max_output_chars: characters an agent may print per rollout before the rest is dropped (None: no limit).
        cancel_grace: seconds a cancelled async agent gets to unwind before it is abandoned.
        worker_id_prefix: the worker id in the store is this prefix followed by the worker number.
        min_poll_interval: first wait after finding the queue empty.
        store_retry_timeout: how long a store call made for an attempt (its resources, its result, its status) is
            retried through an outage (connection errors, 502/503/504); a server error (500) for at most 30 s. Past
            it the attempt fails, or its status is kept and written before the next claim. 4xx are not retried.
    """

    def __init__(
        self,
        tracer: Optional[Tracer] = None,
        max_rollouts: Optional[int] = None,
        poll_interval: float = 1.0,
        heartbeat_interval: float = 10.0,
        interval_jitter: float = 0.5,
        heartbeat_launch_mode: HeartbeatLaunchMode = "thread",
        heartbeat_include_gpu: bool = False,
        *,
        connect_timeout: float = 60.0,
        max_output_chars: Optional[int] = 1_000_000,
        cancel_grace: float = 5.0,
        worker_id_prefix: str = "Worker-",
        min_poll_interval: float = 0.01,
        store_retry_timeout: float = 300.0,
    ) -> None:
        super().__init__()
        if tracer is None:
            from agentlightning.tracer.otel import OtelTracer

            tracer = OtelTracer()
        if max_rollouts is not None and (
            isinstance(max_rollouts, bool) or not isinstance(max_rollouts, int) or max_rollouts < 1
        ):
            raise ValueError(f"max_rollouts must be a positive integer or None, got {max_rollouts!r}")
        if heartbeat_launch_mode not in ("thread", "asyncio"):
            raise ValueError(f"heartbeat_launch_mode must be 'thread' or 'asyncio', got {heartbeat_launch_mode!r}")
        if interval_jitter < 0:
            raise ValueError(f"interval_jitter must not be negative, got {interval_jitter!r}")
        if max_output_chars is not None and max_output_chars < 1:
            raise ValueError(f"max_output_chars must be positive or None, got {max_output_chars!r}")
        self._tracer = tracer
        self.max_rollouts = max_rollouts
        self.poll_interval = _positive("poll_interval", poll_interval)
        self.min_poll_interval = min(_positive("min_poll_interval", min_poll_interval), self.poll_interval)
        self.heartbeat_interval = _positive("heartbeat_interval", heartbeat_interval)
        self.interval_jitter = float(interval_jitter)
        self.heartbeat_launch_mode: HeartbeatLaunchMode = heartbeat_launch_mode
        self.heartbeat_include_gpu = heartbeat_include_gpu
        self.connect_timeout = _positive("connect_timeout", connect_timeout)
        self.max_output_chars = max_output_chars
        self.cancel_grace = _positive("cancel_grace", cancel_grace)
        self.worker_id_prefix = worker_id_prefix
        self.store_retry_timeout = _positive("store_retry_timeout", store_retry_timeout)
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        self._agent: Optional[LitAgent[T_task]] = None
        self._hooks: tuple[Hook, ...] = ()
        self._store: Optional[LightningStore] = None
        self._heartbeat: Optional[Heartbeat] = None
        self._invoker: Optional[AgentInvoker] = None
        self._resources = ResourcesCache()
        self._seen_errors: set[str] = set()
        self._warned_no_reward = False
        self._unwritten: Optional[UnwrittenStatus] = None
        self.rollouts_processed = 0

    def __getstate__(self) -> dict[str, Any]:
        # A runner sent to another process (or copied for another thread) starts uninitialised.
        state = self.__dict__.copy()
        for key in ("_agent", "_store", "_heartbeat", "_invoker"):
            state[key] = None
        state["_hooks"] = ()
        state["_resources"] = ResourcesCache()
        state["_seen_errors"] = set()
        state["_warned_no_reward"] = False
        state["_unwritten"] = None
        state["rollouts_processed"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # --------------------------------------------------------------------------------------------- lifecycle
    @property
    def tracer(self) -> Tracer:
        return self._tracer

    def init(self, agent: LitAgent[T_task], *, hooks: Optional[Sequence[Hook]] = None, **kwargs: Any) -> None:
        """Prepare to run `agent`; `hooks` are called around every rollout."""
        if not isinstance(agent, LitAgent):
            raise TypeError(
                f"The agent must be a LitAgent (or a function decorated with @agl.rollout), got {type(agent).__name__}"
            )
        self._agent = agent
        agent.set_runner(self)
        self._hooks = tuple(hooks or ())
        self._tracer.init()

    def init_worker(self, worker_id: int, store: LightningStore, **kwargs: Any) -> None:  # type: ignore[override]
        """Prepare worker `worker_id` to claim rollouts from `store`."""
        self.worker_id = worker_id
        self._store = store
        try:
            self._tracer.init_worker(worker_id, store)
        except TypeError:  # a v0.2 tracer without the store argument
            self._tracer.init_worker(worker_id)

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        if self._invoker is not None:
            self._invoker.close()
            self._invoker = None
        self._tracer.teardown_worker(worker_id)
        self._store = None
        self._heartbeat = None
        self._resources.clear()
        self.worker_id = None

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        self._tracer.teardown()
        self._agent = None
        self._hooks = ()

    def get_agent(self) -> LitAgent[T_task]:
        if self._agent is None:
            raise ValueError("The runner has no agent: call init(agent) first")
        return self._agent

    def get_store(self) -> LightningStore:
        if self._store is None:
            raise ValueError("The runner has no store: call init_worker(worker_id, store) first")
        return self._store

    def get_worker_id(self) -> str:
        """The id this worker uses in the store ("Worker-<n>" by default)."""
        if self.worker_id is None:
            return f"{self.worker_id_prefix}Unknown"
        return f"{self.worker_id_prefix}{self.worker_id}"

    def _runtime(self) -> tuple[Heartbeat, AgentInvoker]:
        if self._heartbeat is None or self._heartbeat.store is not self.get_store():
            self._heartbeat = Heartbeat(
                self.get_store(),
                self.get_worker_id(),
                interval=self.heartbeat_interval,
                jitter=self.interval_jitter,
                mode=launch_mode_for(self.get_store(), self.heartbeat_launch_mode),
                include_gpu=self.heartbeat_include_gpu,
            )
        if self._invoker is None:
            self._invoker = AgentInvoker(f"agl-{self.get_worker_id()}", cancel_grace=self.cancel_grace)
        return self._heartbeat, self._invoker

    # ------------------------------------------------------------------------------------------------- hooks
    async def _trigger_hooks(self, name: str, **kwargs: Any) -> None:
        for hook in self._hooks:
            try:
                await getattr(hook, name)(**kwargs)
            except Exception:
                logger.exception("Hook %s.%s failed (ignored)", type(hook).__name__, name)

    # --------------------------------------------------------------------------------------------- the loop
    @one_at_a_time
    async def iter(self, *, event: Optional[ExecutionEvent] = None) -> None:
        """Claim and run rollouts until `event` is set or `max_rollouts` were processed.

        Raises:
            StoreUnreachableError: the store could not be reached within `connect_timeout` seconds at start.
        """
        store = self.get_store()
        heartbeat, _ = self._runtime()
        if not await self._connect(heartbeat, event):
            return
        heartbeat.start()
        processed = 0
        delay: Optional[float] = None
        outage_since: Optional[float] = None
        try:
            with output_guard(self.max_output_chars is not None):
                while not is_set(event) and (self.max_rollouts is None or processed < self.max_rollouts):
                    if self._unwritten is not None and not await self._write_unwritten(event, last=False):
                        delay = next_poll_delay(delay, minimum=0.5, maximum=5.0)  # the store still refuses it
                        await self._sleep(delay, event)
                        continue
                    sent_at = time.time()
                    try:
                        claimed = await store.dequeue_rollout(worker_id=self.get_worker_id())
                    except (asyncio.CancelledError, KeyboardInterrupt):
                        await self._release_lost_claim()
                        raise
                    except Exception as exc:
                        if not is_retryable_store_error(exc):
                            raise
                        if outage_since is None:
                            outage_since = time.monotonic()
                            logger.warning(
                                "%s: the store at %s %s (%r); retrying until it is back",
                                self.get_worker_id(),
                                describe_store(store),
                                "answered the claim with a server error" if is_server_error(exc) else "is unreachable",
                                exc,
                            )
                        delay = next_poll_delay(delay, minimum=0.5, maximum=5.0)
                        await self._sleep(delay, event)
                        continue
                    if outage_since is not None:
                        logger.info(
                            "%s: the store is reachable again after %.1f s",
                            self.get_worker_id(),
                            time.monotonic() - outage_since,
                        )
                        outage_since = None
                    if claimed is None:
                        delay = next_poll_delay(delay, minimum=self.min_poll_interval, maximum=self.poll_interval)
                        await self._sleep(delay, event)
                        continue
                    delay = None
                    await self._run_claimed(claimed, sent_at=sent_at, event=event, raise_on_exception=False)
                    processed += 1
                    if processed in (1, 10, 100) or processed % 1000 == 0:  # DEBUG: INFO shows the algorithm's steps
                        logger.debug("%s finished %d rollouts", self.get_worker_id(), processed)
        finally:
            if self._unwritten is not None:
                await self._write_unwritten(event, last=True)
            await heartbeat.stop()
            await self._report_stopped(heartbeat)
        logger.debug("%s stopped after %d rollouts", self.get_worker_id(), processed)

    async def _report_stopped(self, heartbeat: Heartbeat) -> None:
        """Tell the store this worker stopped (best effort, a few seconds at most: the store may be the reason)."""
        try:
            await asyncio.wait_for(heartbeat.beat_stopped(), STOPPED_REPORT_TIMEOUT)
        except Exception as exc:
            logger.debug("%s could not report that it stopped: %r", self.get_worker_id(), exc)

    async def _write_unwritten(self, event: Optional[ExecutionEvent], *, last: bool) -> bool:
        """Write the kept final status of the last attempt; True once it is settled (written or refused for good)."""
        assert self._unwritten is not None
        if not await write_unwritten(self.get_store(), self._unwritten, self._store_call(event), last=last):
            return False
        self._unwritten = None
        return True

    async def _release_lost_claim(self) -> None:
        await release_lost_claim(self.get_store(), self.get_worker_id())

    async def _connect(self, heartbeat: Heartbeat, event: Optional[ExecutionEvent]) -> bool:
        return await register_worker(
            heartbeat, worker_id=self.get_worker_id(), connect_timeout=self.connect_timeout, event=event
        )

    async def _sleep(self, seconds: float, event: Optional[ExecutionEvent]) -> None:
        await sleep_unless_stopped(seconds, event)

    @one_at_a_time
    async def step(
        self,
        input: T_task,
        *,
        resources: Optional[NamedResources] = None,
        mode: Optional[RolloutMode] = None,
        event: Optional[ExecutionEvent] = None,
    ) -> Rollout:
        """Run the agent on `input` now, outside the queue, and return the finished rollout.

        `resources` (optional) are added to the store first and used for this rollout. Exceptions of the agent are
        raised here (the attempt is marked failed first).
        """
        store = self.get_store()
        heartbeat, _ = self._runtime()
        resources_id: Optional[str] = None
        if resources is not None:
            resources_id = (await store.add_resources(resources)).resources_id
        sent_at = time.time()
        claimed = await store.start_rollout(
            input=input, mode=mode, resources_id=resources_id, worker_id=self.get_worker_id()
        )
        heartbeat.start()
        try:
            with output_guard(self.max_output_chars is not None):
                await self._run_claimed(claimed, sent_at=sent_at, event=event, raise_on_exception=True)
        finally:
            if self._unwritten is not None:
                await self._write_unwritten(event, last=True)
            await heartbeat.stop()
        rollout = await store.get_rollout_by_id(claimed.rollout_id)
        if rollout is None:
            raise RuntimeError(f"Failed to fetch completed rollout by id after step: {claimed.rollout_id}")
        return rollout

    # ------------------------------------------------------------------------------------------ one rollout
    async def _run_claimed(
        self,
        claimed: AttemptedRollout,
        *,
        sent_at: float,
        event: Optional[ExecutionEvent],
        raise_on_exception: bool,
    ) -> str:
        """Run the agent on a claimed rollout and record the attempt's outcome. Returns the rollout id."""
        heartbeat, _ = self._runtime()
        store = self.get_store()
        agent = self.get_agent()
        heartbeat.clock_offset = server_clock_offset(claimed.attempt.start_time, sent_at, time.time())
        loop = asyncio.get_running_loop()
        running = RunningAttempt(claimed.rollout_id, claimed.attempt.attempt_id, loop.create_future(), loop)
        heartbeat.current = running
        started = time.perf_counter()
        outcome: AttemptOutcome = SUCCEEDED
        spans: list[Any] = []
        failure: Optional[Exception] = None
        try:
            try:
                resources = await self._resources.get(store, claimed, self._store_call(event))
                await self._trigger_hooks("on_rollout_start", agent=agent, runner=self, rollout=claimed)
                normalized, spans = await self._trace_and_run(agent, claimed, resources, running)
                spans = spans + await store_result(store, claimed, normalized, self._store_call(event))
            except (asyncio.CancelledError, KeyboardInterrupt):  # the runner itself is stopped (the agent's own are
                outcome = outcome_of_exception(RunnerInterrupted())  # AgentBaseException by now)
                raise
            except Exception as exc:
                outcome = outcome_of_exception(exc, raised_by_agent=exc is running.agent_error)
                failure = exc
                log_attempt_failure(claimed, outcome, self._seen_errors)
            except BaseException as exc:  # not the agent's (a hook's, the tracer's): fail the attempt, then stop
                outcome = outcome_of_exception(exc)
                raise
        finally:
            heartbeat.current = None
            reward = find_final_reward(spans) if spans else None
            if reward is None and outcome.succeeded and not self._warned_no_reward:
                self._warned_no_reward = True
                logger.warning(
                    "Rollout %s finished without a reward (no reward span, no numeric result); further rollouts "
                    "without a reward are counted in the trainer's summary, not logged",
                    claimed.rollout_id,
                )
            await self._trigger_hooks("on_rollout_end", agent=agent, runner=self, rollout=claimed, spans=spans)
            duration = time.perf_counter() - started
            self._unwritten = await finish_attempt(store, claimed, outcome, reward, duration, self._store_call(event))
            self.rollouts_processed += 1
        if failure is not None and raise_on_exception:
            raise failure
        return claimed.rollout_id

    async def _trace_and_run(
        self,
        agent: LitAgent[T_task],
        claimed: AttemptedRollout,
        resources: NamedResources,
        running: RunningAttempt,
    ) -> tuple[NormalizedResult, list[Any]]:
        tracer = self._tracer
        _, invoker = self._runtime()
        is_async = agent.is_async()
        if claimed.mode == "train":
            method: Callable[..., Any] = agent.training_rollout_async if is_async else agent.training_rollout
        else:
            method = agent.validation_rollout_async if is_async else agent.validation_rollout
        timeout = claimed.config.timeout_seconds

        def call() -> Any:
            return method(claimed.input, resources=resources, rollout=claimed)

        with running_rollout(self), output_budget(claimed.rollout_id, self.max_output_chars):
            async with tracer.trace_context(
                name=claimed.rollout_id,
                store=self.get_store(),
                rollout_id=claimed.rollout_id,
                attempt_id=claimed.attempt.attempt_id,
            ):
                await self._trigger_hooks("on_trace_start", agent=agent, runner=self, tracer=tracer, rollout=claimed)
                try:
                    raw = await invoker.call(call, is_async=is_async, timeout=timeout, abort=running.abort)
                except (AgentTimeout, StoreDeclaredTimeout):
                    raise
                except Exception as exc:  # the agent's own code raised (AgentExit, AgentBaseException included)
                    running.agent_error = exc
                    raise
                await self._trigger_hooks("on_trace_end", agent=agent, runner=self, tracer=tracer, rollout=claimed)
        normalized = normalize_result(raw)
        try:
            traced: list[Any] = list(tracer.get_last_trace())
        except Exception:
            logger.debug("get_last_trace failed", exc_info=True)
            traced = []
        return normalized, traced

    def _store_call(self, event: Optional[ExecutionEvent]) -> StoreCall:
        """This worker's store calls for an attempt: retried through an outage for at most `store_retry_timeout`
        seconds (or the given `limit`, if shorter), given up soon after `event` is set."""
        worker_id = self.get_worker_id()
        bound = self.store_retry_timeout

        def call(operation: Callable[[], Awaitable[R]], what: str, *, limit: Optional[float] = None) -> Awaitable[R]:
            limit = bound if limit is None else min(limit, bound)
            return retry_store_call(operation, what, worker_id=worker_id, event=event, limit=limit)

        return call
