"""What a user watches during `Trainer.fit`: rollouts done/failed/running, reward, throughput, runners alive, and
what the algorithm says of its steps.

A monitor thread reads the store every tick (status counts, the rollouts finished since the last tick, workers) into
a `ProgressTracker` (snapshot.py: plain state, no I/O) and hands each `ProgressSnapshot` to its sinks: a rich live
panel on a terminal, a plain line every `log_interval` seconds otherwise (printed to stderr when logging is not
configured), and optionally a JSON-lines file. A tick costs the store five counts and one query of the newly finished
rollouts (at most 500); with log lines only the store is read every 5 s by default, and never more than 1 % of the
time (`READ_BUDGET`: the counts grow with the store). See docs/benchmarks-appendix.md, "Progress poller".
The algorithm's events (`Algorithm.add_event_listener`, which the Trainer subscribes `on_algorithm_event` to) are
folded into an `AlgorithmProgress` (agentlightning/algorithm/events.py) and reach the sinks as they come: the panel
shows its rows beside the counts, log lines say each step and evaluation, the JSON-lines file records each event.
The final snapshot and the most frequent failure reasons make the run summary.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any, Literal, Optional, Protocol

from agentlightning.algorithm.events import AlgorithmProgress
from agentlightning.runner.heartbeat import has_stopped
from agentlightning.types import Rollout, RolloutStatus
from agentlightning.utils.io_loop import io_loop

from .snapshot import FINISHED, ProgressSnapshot, ProgressTracker, RunSummary

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore

__all__ = ["ProgressMonitor", "ProgressSnapshot", "ProgressTracker", "RunSummary", "report"]

logger = logging.getLogger("agentlightning.trainer")


def report(message: str) -> None:
    """Tell the user `message`: an INFO record when logging is configured (the user's levels apply), else a line on
    stderr, so that progress and the summary show in a CI log or a `nohup` run where nothing configured logging."""
    if logger.hasHandlers():
        logger.info(message)
    else:
        print(message, file=sys.stderr, flush=True)


ProgressMode = Literal["auto", "rich", "log", "off"]
_STATUS_GROUPS: dict[str, tuple[RolloutStatus, ...]] = {
    "queued": ("queuing", "requeuing"),
    "running": ("preparing", "running"),
    "succeeded": ("succeeded",),
    "failed": ("failed",),
    "cancelled": ("cancelled",),
}
_FINISHED_PER_READ = 500
"""Most finished rollouts read at once (their rewards feed the window; faster runs are sampled)."""
_READ_MARGIN = 10
"""Read a few more than the counts say finished, for rollouts finishing between the two calls."""
READ_BUDGET = 0.01
"""Largest share of the time the monitor spends reading the store: after a read that took t seconds it waits at
least t / READ_BUDGET (the counts grow with the store, so reads of a large store are spaced out)."""


class ProgressSink(Protocol):
    def show(self, snapshot: ProgressSnapshot) -> None: ...

    def event(self, kind: str, payload: dict[str, Any], algorithm: AlgorithmProgress) -> None:
        """An algorithm's event, already folded into `algorithm` (called on the algorithm's thread)."""

    def close(self, summary: Optional[RunSummary]) -> None: ...


def _rewards_text(s: ProgressSnapshot) -> str:
    """The training reward, and the validation reward apart once evaluation rollouts finished."""
    text = f"reward {s.reward_mean:.4g}" if s.reward_mean is not None else "reward n/a"
    if s.val_reward_mean is not None:
        text += f", validation reward {s.val_reward_mean:.4g}"
    return text


def format_line(s: ProgressSnapshot) -> str:
    line = (
        f"{s.done} done ({s.succeeded} succeeded, {s.failed} failed), {s.running} running, {s.queued} queued, "
        f"{s.rollouts_per_second:.1f} rollouts/s, {_rewards_text(s)}, runners {s.runners_alive} alive"
    )
    if s.store_unreachable_for is not None:
        line = f"waiting for the store (unreachable for {s.store_unreachable_for:.0f} s); last seen: {line}"
    return line


class LogSink:
    """A progress line every `interval` seconds (see `report`)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = float("-inf")
        self._waiting = False

    def show(self, snapshot: ProgressSnapshot) -> None:
        now = time.monotonic()
        waiting = snapshot.store_unreachable_for is not None
        changed, self._waiting = waiting != self._waiting, waiting
        if changed or now - self._last >= self.interval:  # a store that stops or resumes answering: at once
            self._last = now
            report(f"Progress: {format_line(snapshot)}")

    def event(self, kind: str, payload: dict[str, Any], algorithm: AlgorithmProgress) -> None:
        for line in algorithm.lines(kind, payload):  # a step or an evaluation: at once, whatever the interval
            report(line)

    def close(self, summary: Optional[RunSummary]) -> None:
        pass


class RichSink:
    """A live panel on the terminal (rich): the counts, then the rows of the algorithm's events."""

    def __init__(self, title: str, algorithm: Optional[AlgorithmProgress] = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self._title = title
        self._algorithm = algorithm or AlgorithmProgress()
        self._snapshot = ProgressSnapshot()
        self._live = Live(self._render(self._snapshot), console=Console(stderr=True), refresh_per_second=4)
        self._live.start()

    def _render(self, s: ProgressSnapshot) -> Any:
        from rich.panel import Panel
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row(
            "rollouts",
            f"[green]{s.succeeded} succeeded[/]  [red]{s.failed} failed[/]  {s.cancelled} cancelled  "
            f"[cyan]{s.running} running[/]  {s.queued} queued",
        )
        table.add_row("throughput", f"{s.rollouts_per_second:.1f} rollouts/s")
        table.add_row("reward", f"{_rewards_text(s)} (mean of the last rollouts)  {s.without_reward} without reward")
        table.add_row("runners", f"{s.runners_alive} alive")
        if s.store_unreachable_for is not None:
            table.add_row("store", f"[yellow]waiting: unreachable for {s.store_unreachable_for:.0f} s[/]")
        for label, text in self._algorithm.rows():
            table.add_row(label, text)
        return Panel(table, title=f"{self._title} · {s.elapsed:.0f} s", expand=False)

    def show(self, snapshot: ProgressSnapshot) -> None:
        self._snapshot = snapshot
        self._live.update(self._render(snapshot))

    def event(self, kind: str, payload: dict[str, Any], algorithm: AlgorithmProgress) -> None:
        self._live.update(self._render(self._snapshot))

    def close(self, summary: Optional[RunSummary]) -> None:
        if summary is not None:
            self._live.update(self._render(summary.snapshot))
        self._live.stop()


class JsonLinesSink:
    """One JSON object per tick, one per algorithm event (`{"time", "event": kind, "payload"}`; an evaluation without
    its per-task `items`), and the summary (`"final": true`) at the end."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()  # ticks come from the monitor's thread, events from the algorithm's

    def _write(self, data: dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(data, default=str) + "\n")
            self._file.flush()

    def show(self, snapshot: ProgressSnapshot) -> None:
        data = asdict(snapshot)
        data.update({"time": time.time(), "done": snapshot.done, "final": False})
        self._write(data)

    def event(self, kind: str, payload: dict[str, Any], algorithm: AlgorithmProgress) -> None:
        # An evaluation's per-task items stay in the run's summary.json: the file gets its figures, not its answers.
        kept = {key: value for key, value in payload.items() if key != "items"}
        self._write({"time": time.time(), "event": kind, "payload": kept})

    def close(self, summary: Optional[RunSummary]) -> None:
        if summary is not None:
            data = summary.to_dict()
            data.update({"time": time.time(), "final": True})
            self._write(data)
        with self._lock:
            self._file.close()


async def _count(store: LightningStore, statuses: Sequence[RolloutStatus]) -> int:
    page = await store.query_rollouts(status_in=list(statuses), limit=0)
    total = getattr(page, "total", None)
    return int(total) if isinstance(total, int) else len(page)


async def read_counts(store: LightningStore) -> dict[str, int]:
    """Rollout counts per status group."""
    return {group: await _count(store, statuses) for group, statuses in _STATUS_GROUPS.items()}


async def failure_reasons(store: LightningStore, *, limit: int = 1000, top: int = 5) -> list[tuple[str, int]]:
    """The most frequent failure reasons among the last `limit` failed rollouts."""
    failed = await store.query_rollouts(status_in=["failed"], sort_by="end_time", sort_order="desc", limit=limit)
    reasons: Counter[str] = Counter()
    for rollout in failed:
        attempt = getattr(rollout, "attempt", None)
        metadata = getattr(attempt, "metadata", None) or {}
        reason = metadata.get("error") or f"attempt {getattr(attempt, 'status', 'unknown')}"
        reasons[str(reason).splitlines()[0][:200]] += 1
    return reasons.most_common(top)


class ProgressMonitor:
    """Polls the store in a thread and feeds the sinks (see the module docstring).

    Args:
        store: the run's store (must be usable from another thread; every store in this package is).
        mode: "auto" (rich on a terminal, log lines otherwise), "rich", "log" or "off".
        interval: seconds between store reads when a live panel or a JSON-lines file shows every tick (rich
            refreshes smoothly in between); with log lines only, the store is read every `interval` or every half
            `log_interval`, whichever is longer.
        log_interval: seconds between log lines in "log" mode.
        jsonl_path: also append snapshots to this JSON-lines file.
        title: the panel's title.
        alive_after: a worker counts as alive if it was heard from within this many seconds.
        adapter: the run's adapter; when given, a summary of a run in which no rollout produced an LLM call says so
            with the adapter's diagnosis (`capture_check.missing_llm_calls`).
    """

    def __init__(
        self,
        store: LightningStore,
        *,
        mode: ProgressMode = "auto",
        interval: float = 1.0,
        log_interval: float = 10.0,
        jsonl_path: Optional[str] = None,
        title: str = "Agent Lightning",
        alive_after: float = 30.0,
        adapter: Any = None,
    ) -> None:
        if mode not in ("auto", "rich", "log", "off"):
            raise ValueError(f"progress must be 'auto', 'rich', 'log' or 'off', got {mode!r}")
        self.store = store
        self.mode = mode
        self.interval = interval
        self.log_interval = log_interval
        self.jsonl_path = jsonl_path
        self.title = title
        self.alive_after = alive_after
        self.adapter = adapter
        self.tracker = ProgressTracker()
        self.algorithm = AlgorithmProgress()  # what the algorithm's events said (see `on_algorithm_event`)
        self.summary: Optional[RunSummary] = None
        self.read_interval = interval
        self._done_read: Optional[int] = None  # rollouts finished at the last read (None: no read yet)
        self._sinks: list[ProgressSink] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last: ProgressSnapshot = ProgressSnapshot()
        self._started_at = time.time()
        self._unreachable_since: Optional[float] = None
        # Seconds the algorithm has been waiting for the store (the Trainer sets it to its PatientStore's
        # `waiting_for`), so the display says "waiting" even between this monitor's own reads.
        self.waiting_probe: Optional[Callable[[], Optional[float]]] = None

    def _make_sinks(self) -> list[ProgressSink]:
        sinks: list[ProgressSink] = []
        mode = self.mode
        if mode == "auto":
            mode = "rich" if sys.stderr.isatty() else "log"
        if mode == "rich":
            try:
                sinks.append(RichSink(self.title, self.algorithm))
            except ImportError:
                logger.info("rich is not installed; progress is logged instead (pip install rich)")
                mode = "log"
        if mode == "log":
            sinks.append(LogSink(self.log_interval))
        if self.jsonl_path:
            sinks.append(JsonLinesSink(self.jsonl_path))
        if all(isinstance(sink, LogSink) for sink in sinks):
            self.read_interval = max(self.interval, self.log_interval / 2)
        return sinks

    async def _read(self) -> ProgressSnapshot:
        counts = await read_counts(self.store)
        done = sum(counts.get(status, 0) for status in FINISHED)
        # Only the rollouts that finished since the last read (the newest first), at most _FINISHED_PER_READ.
        wanted = _FINISHED_PER_READ if self._done_read is None else min(_FINISHED_PER_READ, done - self._done_read)
        finished: Sequence[Rollout] = []
        if wanted > 0:
            finished = await self.store.query_rollouts(
                status_in=list(FINISHED), sort_by="end_time", sort_order="desc", limit=wanted + _READ_MARGIN
            )
        self._done_read = done
        workers = await self.store.query_workers()
        now = time.time()
        recent = [
            worker
            for worker in workers
            if max(worker.last_heartbeat_time or 0.0, worker.last_dequeue_time or 0.0) >= self._started_at
        ]
        alive = sum(
            1
            for worker in recent
            if now - max(worker.last_heartbeat_time or 0.0, worker.last_dequeue_time or 0.0) <= self.alive_after
            and not has_stopped(worker.heartbeat_stats)
        )
        return self.tracker.update(counts, list(finished), alive, len(recent))

    async def start_async(self) -> None:
        """Read the baseline (what the store held before the run) and start the thread."""
        try:
            counts = await read_counts(self.store)
            finished = await self.store.query_rollouts(
                status_in=list(FINISHED), sort_by="end_time", sort_order="desc", limit=_FINISHED_PER_READ
            )
            self.tracker.set_baseline(counts, list(finished))
            self._done_read = sum(counts.get(status, 0) for status in FINISHED)
        except Exception as exc:
            logger.debug("progress: could not read the baseline: %r", exc)
        if self.mode == "off" and not self.jsonl_path:
            return
        self._sinks = self._make_sinks()
        self._thread = threading.Thread(target=self._thread_main, name="agl-progress", daemon=True)
        self._thread.start()

    @property
    def showing(self) -> bool:
        """Whether anything shows the progress (a panel, log lines or a JSON-lines file); set by `start_async`."""
        return bool(self._sinks)

    def on_algorithm_event(self, kind: str, payload: dict[str, Any]) -> None:
        """Show an algorithm's event (an `Algorithm.add_event_listener` listener; called on the algorithm's thread)."""
        if not self.algorithm.update(kind, payload):
            return
        for sink in self._sinks:
            try:
                sink.event(kind, payload, self.algorithm)
            except Exception:
                logger.debug("progress sink failed on an algorithm event", exc_info=True)

    def _thread_main(self) -> None:
        wait = self.read_interval
        while not self._stop.wait(wait):
            started = time.perf_counter()
            read = self._tick()
            # The read budget spaces out reads that cost time; a read that failed (the store unreachable,
            # retrying) cost waiting, not work: the next one comes at the usual interval.
            spent = time.perf_counter() - started if read else 0.0
            wait = max(self.read_interval, spent / READ_BUDGET)

    def _tick(self) -> bool:
        """Read the store (on the process's I/O loop) and show the snapshot; False when the read failed."""
        from agentlightning.runner.errors import is_transient_store_error

        read = True
        try:
            self._last = io_loop().run(self._read())
            self._unreachable_since = None
            shown = self._last
        except Exception as exc:
            read = False
            logger.debug("progress: store read failed: %r", exc)
            if not is_transient_store_error(exc):
                return read
            # The store is restarting or unreachable: say so instead of showing stale numbers as current.
            now = time.monotonic()
            if self._unreachable_since is None:
                self._unreachable_since = now
            shown = replace(self._last, store_unreachable_for=now - self._unreachable_since)
        waiting = self.waiting_probe() if self.waiting_probe is not None else None
        if waiting is not None and (shown.store_unreachable_for or 0.0) < waiting:
            shown = replace(shown, store_unreachable_for=waiting)
        for sink in self._sinks:
            try:
                sink.show(shown)
            except Exception:
                logger.debug("progress sink failed", exc_info=True)
        return read

    async def _missing_llm_calls(self, snapshot: ProgressSnapshot, read_timeout: float) -> Optional[str]:
        if self.adapter is None or not snapshot.done:
            return None
        from .capture_check import missing_llm_calls

        try:
            return await asyncio.wait_for(
                missing_llm_calls(self.store, self.adapter, since=self._started_at), read_timeout
            )
        except Exception as exc:
            logger.debug("progress: capture check failed: %r", exc)
            return None

    async def stop_async(self, *, read_timeout: float = 10.0) -> RunSummary:
        """Stop the thread, read the final state and close the sinks; the run summary. A store that does not answer
        within `read_timeout` seconds leaves the last snapshot in the summary."""
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10.0)
        try:
            snapshot = await asyncio.wait_for(self._read(), read_timeout)
            reasons = await asyncio.wait_for(failure_reasons(self.store), read_timeout) if snapshot.failed else []
        except Exception as exc:
            logger.debug("progress: final read failed: %r", exc)
            snapshot, reasons = self._last, []
        self.summary = RunSummary(snapshot, reasons, await self._missing_llm_calls(snapshot, read_timeout))
        for sink in self._sinks:
            try:
                sink.close(self.summary)
            except Exception:
                logger.debug("progress sink close failed", exc_info=True)
        return self.summary
