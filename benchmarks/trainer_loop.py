"""Trainer.fit end to end: rollouts/s with a no-op agent, in shm and cs modes, with 1, 2 and 4 runners; and the
per-rollout overhead the runner adds to the store operations a rollout needs anyway.

    .venv/bin/python benchmarks/trainer_loop.py                    # everything (about a minute on 2 cores)
    .venv/bin/python benchmarks/trainer_loop.py --modes shm --runners 4 --rollouts 3000
    .venv/bin/python benchmarks/trainer_loop.py --progress-pairs 5 --rollouts 20000 --modes shm,cs --runners 2

`--progress-pairs N` measures the progress poller instead: N runs without it (`progress="off"`) and N with it
(`progress="log"`: the store is read every 5 s for a line every 10 s), in pairs whose order alternates (off-on,
on-off, ...), so that the load of a shared machine hits both alike; it prints every rate and CPU figure, and the
median over the pairs of the difference within each pair.

The algorithm enqueues every rollout at once (`enqueue_many_rollouts`) and waits for all of them; the rate is
measured from the enqueue to the last rollout finishing. Before that, the algorithm waits until every runner has
registered with the store and runs a warm-up batch (`--warmup` rollouts per runner, not counted), so neither process
start-up (reported separately as the wall time of `fit`) nor the imports of the first rollout are counted. Without
it, in cs mode the window also held the start-up CPU of every runner process (about 0.5 s each), which made the
runners' CPU per rollout look as if it grew with their number. `--warmup 0` measures as before. The agent returns a
reward of 1.0, which the runner stores as a reward span.

CPU per rollout is user + system time over the same window: the main process (algorithm, and in cs mode the store
server) and the runner processes (cs), from psutil. `--json PATH` writes the figures (rollouts/s per mode and
runner count against the targets with 4 runners; with `--progress-pairs`, the poller's CPU share) through
benchmarks/_results.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from typing import Any, Optional

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _results import Figure, add_json_argument, write_results

import agentlightning as agl
from agentlightning.algorithm.base import Algorithm
from agentlightning.types import EnqueueRolloutRequest


class NoOpAgent(agl.LitAgent[Any]):
    async def rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        return 1.0


def _cpu_seconds() -> tuple[float, dict[int, float]]:
    """CPU seconds (user + system) used so far by this process (all threads) and by each child process."""
    me = psutil.Process()
    times = me.cpu_times()
    children: dict[int, float] = {}
    for child in me.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.Error:
            continue
        children[child.pid] = child_times.user + child_times.system
    return times.user + times.system, children


class EnqueueAllWaitAll(Algorithm):
    """Enqueue the whole dataset in one call, then wait for every rollout; records the timing."""

    def __init__(self, warmup: int = 0, runners: int = 0) -> None:
        self.warmup = warmup
        self.runners = runners
        self.seconds = 0.0
        self.finished = 0
        self.succeeded = 0
        self.cpu_main = 0.0
        self.cpu_children = 0.0

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        if self.warmup:
            deadline = time.monotonic() + 120
            while len(await store.query_workers()) < self.runners and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # every runner registered (its process is up)
            warm = await store.enqueue_many_rollouts(
                [EnqueueRolloutRequest(input={"warmup": i}) for i in range(self.warmup)]
            )
            await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in warm], timeout=600)
        main_before, children_before = _cpu_seconds()
        started = time.perf_counter()
        rollouts = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=item) for item in train_dataset])
        done = await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in rollouts], timeout=600)
        self.seconds = time.perf_counter() - started
        main_after, children_after = _cpu_seconds()
        self.cpu_main = main_after - main_before
        self.cpu_children = sum(seconds - children_before.get(pid, 0.0) for pid, seconds in children_after.items())
        self.finished = len(done)
        self.succeeded = sum(1 for rollout in done if rollout.status == "succeeded")


def run_fit(
    mode: str,
    runners: int,
    rollouts: int,
    warmup_per_runner: int = 0,
    progress: str = "off",
    shm_agent_loop: str = "shared",
) -> dict[str, Any]:
    algorithm = EnqueueAllWaitAll(warmup=warmup_per_runner * runners, runners=runners)
    from agentlightning.execution import SharedMemoryExecutionStrategy
    from agentlightning.tracer.otel import OtelTracer

    strategy: Any = mode
    if mode == "shm" and shm_agent_loop != "shared":
        strategy = SharedMemoryExecutionStrategy(n_runners=runners, shared_agent_loop=False)
    trainer = agl.Trainer(
        algorithm=algorithm,
        n_runners=runners,
        strategy=strategy,
        tracer=OtelTracer(),
        progress=progress,  # type: ignore[arg-type]
    )
    started = time.perf_counter()
    trainer.fit(NoOpAgent(), [{"i": i} for i in range(rollouts)])
    wall = time.perf_counter() - started
    return {
        "mode": mode,
        "runners": runners,
        "rollouts": rollouts,
        "succeeded": algorithm.succeeded,
        "rate": algorithm.finished / algorithm.seconds if algorithm.seconds else 0.0,
        "cpu_main_us": algorithm.cpu_main / rollouts * 1e6,
        "cpu_children_us": algorithm.cpu_children / rollouts * 1e6,
        "wall": wall,
    }


# ---------------------------------------------------------------------------------- per-rollout overhead
async def _bare_store_loop(rollouts: int) -> float:
    """Seconds per rollout for the store operations a rollout needs: claim, one reward span, the final status."""
    from agentlightning.store import InMemoryLightningStore, LightningStoreThreaded
    from agentlightning.types import Span

    store = LightningStoreThreaded(InMemoryLightningStore())
    await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(rollouts)])
    started = time.perf_counter()
    for _ in range(rollouts):
        claimed = await store.dequeue_rollout(worker_id="w")
        assert claimed is not None
        fields = agl.emit_reward(1.0, propagate=False)
        assert fields is not None
        (seq,) = await store.get_many_span_sequence_ids([(claimed.rollout_id, claimed.attempt.attempt_id)])
        span = Span.from_core_fields(
            fields, rollout_id=claimed.rollout_id, attempt_id=claimed.attempt.attempt_id, sequence_id=seq
        )
        await store.add_many_spans([span])
        await store.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded", metadata={})
    return (time.perf_counter() - started) / rollouts


async def _runner_loop(rollouts: int, tracer_name: str) -> float:
    """Seconds per rollout of LitAgentRunner.iter over the same store with a no-op agent."""
    from agentlightning.runner import LitAgentRunner
    from agentlightning.store import InMemoryLightningStore, LightningStoreThreaded
    from agentlightning.tracer import DummyTracer
    from agentlightning.tracer.otel import OtelTracer

    store = LightningStoreThreaded(InMemoryLightningStore())
    await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(rollouts)])
    tracer = OtelTracer() if tracer_name == "otel" else DummyTracer()
    runner: LitAgentRunner[Any] = LitAgentRunner(tracer=tracer, max_rollouts=rollouts)
    with runner.run_context(agent=NoOpAgent(), store=store):
        started = time.perf_counter()
        await runner.iter()
        return (time.perf_counter() - started) / rollouts


def overhead(rollouts: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per rollout of the store loop alone, the runner with DummyTracer and with OtelTracer, measured in turn
    in each repeat (so that each repeat's three share the machine's load): every repeat's value, in order."""
    found: dict[str, list[float]] = {"bare": [], "runner_dummy": [], "runner_otel": []}
    for _ in range(repeats):
        found["bare"].append(asyncio.run(_bare_store_loop(rollouts)))
        found["runner_dummy"].append(asyncio.run(_runner_loop(rollouts, "dummy")))
        found["runner_otel"].append(asyncio.run(_runner_loop(rollouts, "otel")))
    return found


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


async def _read_cost(size: int, reads: int, finished_between: int) -> dict[str, float]:
    """CPU seconds of one progress read on an in-memory store holding `size` finished rollouts, with
    `finished_between` rollouts finishing between two reads: the reads as they are (five counts, the rollouts finished
    since the last read, workers) and the first version's (the newest 500 finished every time), alternating."""
    from agentlightning.store import InMemoryLightningStore, LightningStoreThreaded
    from agentlightning.trainer.progress import ProgressMonitor

    store = LightningStoreThreaded(InMemoryLightningStore())
    total = size + 2 * reads * finished_between
    await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(total)])

    async def finish(count: int) -> None:
        for _ in range(count):
            claimed = await store.dequeue_rollout(worker_id="w")
            assert claimed is not None
            await store.update_attempt(
                claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded", metadata={"final_reward": 1.0}
            )

    await finish(size)
    monitor = ProgressMonitor(store, mode="off")
    await monitor.start_async()
    spent = {"now": 0.0, "first_version": 0.0}
    for _ in range(reads):
        for style in ("now", "first_version"):
            await finish(finished_between)
            if style == "first_version":
                monitor._done_read = None  # pyright: ignore[reportPrivateUsage]  # read the newest 500
            started = time.thread_time()
            await monitor._read()  # pyright: ignore[reportPrivateUsage]
            spent[style] += time.thread_time() - started
    return {style: seconds / reads for style, seconds in spent.items()}


def read_cost(sizes: list[int], reads: int) -> None:
    print(
        "| finished rollouts in the store | finished between reads | CPU ms per read now "
        "| first version (newest 500 every read) | load average |"
    )
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        for between in (20, 1000):
            figures = asyncio.run(_read_cost(size, reads, between))
            print(
                f"| {size:,} | {between:,} | {figures['now'] * 1e3:.1f} | {figures['first_version'] * 1e3:.1f} "
                f"| {_load():.1f} |",
                flush=True,
            )


def progress_pairs(
    modes: list[str], runner_counts: list[int], rollouts: int, warmup: int, pairs: int
) -> list[dict[str, Any]]:
    """Rates without and with the progress poller, alternating (see the module docstring); one entry per setting."""
    found: list[dict[str, Any]] = []
    print(
        "| mode | runners | rollouts | off: rollouts/s | log: rollouts/s | rate difference (median of pairs) "
        "| off: CPU µs/rollout | log: CPU µs/rollout | CPU difference (median of pairs) | load average |"
    )
    print("|---|---:|---:|---|---|---:|---|---|---:|---|")
    for mode in modes:
        for runners in runner_counts:
            count = rollouts or (3000 if mode == "shm" else 1500)
            rates: dict[str, list[float]] = {"off": [], "log": []}
            cpu: dict[str, list[float]] = {"off": [], "log": []}
            loads: list[float] = []
            for pair in range(pairs):
                for progress in ("off", "log") if pair % 2 == 0 else ("log", "off"):
                    result = run_fit(mode, runners, count, warmup, progress)
                    rates[progress].append(result["rate"])
                    cpu[progress].append(result["cpu_main_us"] + result["cpu_children_us"])
                    loads.append(_load())
            rate_change = statistics.median(on / off - 1 for off, on in zip(rates["off"], rates["log"], strict=True))
            cpu_change = statistics.median(on / off - 1 for off, on in zip(cpu["off"], cpu["log"], strict=True))

            def joined(values: list[float]) -> str:
                return " / ".join(f"{value:,.0f}" for value in values)

            print(
                f"| {mode} | {runners} | {count} | {joined(rates['off'])} | {joined(rates['log'])} | "
                f"{rate_change * 100:+.1f} % | {joined(cpu['off'])} | {joined(cpu['log'])} | {cpu_change * 100:+.1f} % "
                f"| {min(loads):.1f}-{max(loads):.1f} |",
                flush=True,
            )
            found.append(
                {"mode": mode, "runners": runners, "rollouts": count, "pairs": pairs, "rate_change": rate_change,
                 "cpu_change": cpu_change, "rates": rates, "cpu_us": cpu}
            )  # fmt: skip
    return found


def loop_figures(results: list[dict[str, Any]]) -> list[Figure]:
    """Rollouts/s per mode and runner count (targets with 4 runners), the cs growth from 1 to 4 runners."""
    targets = {("shm", 4): 1500, ("cs", 4): 300}
    found = []
    for r in results:
        target = targets.get((r["mode"], r["runners"]))
        every = r["succeeded"] == r["rollouts"]
        kind = ("runner thread" if r["mode"] == "shm" else "runner process") + ("s" if r["runners"] > 1 else "")
        found.append(
            Figure(
                key=f"trainer.{r['mode']}.runners_{r['runners']}.rollouts_per_s",
                label=f"Trainer.fit, no-op agent, {r['mode']}, {r['runners']} {kind}",
                value=round(r["rate"]),
                unit="rollouts/s",
                target=f">= {target:,} rollouts/s, every rollout succeeding" if target else None,
                met=(r["rate"] >= target and every) if target else None,
                detail={
                    "rollouts": r["rollouts"],
                    "succeeded": r["succeeded"],
                    "cpu_us_per_rollout_main": round(r["cpu_main_us"]),
                    "cpu_us_per_rollout_runners": round(r["cpu_children_us"]),
                },
            )
        )
    cs = {r["runners"]: r["rate"] for r in results if r["mode"] == "cs"}
    if 1 in cs and max(cs) > 1:
        most = max(cs)
        found.append(
            Figure(
                key="trainer.cs.growth",
                label=f"Trainer.fit, cs: rollouts/s with {most} runner processes over 1",
                value=round(cs[most] / cs[1], 2),
                unit="x",
                target="> 1 (grows from 1 to 4 runners)",
                met=cs[most] > cs[1],
            )
        )
    return found


def progress_figures(results: list[dict[str, Any]]) -> list[Figure]:
    """CPU per rollout with the progress poller over without it (median of the pairs' differences)."""
    return [
        Figure(
            key=f"trainer.progress.{r['mode']}.cpu_change_pct",
            label=f"Trainer progress poller: CPU per rollout added to a no-op loop ({r['mode']}, {r['runners']} runners)",
            value=round(r["cpu_change"] * 100, 1),
            unit="%",
            target="< 2 %",
            met=r["cpu_change"] * 100 < 2,
            higher_is_better=False,
            detail={
                "pairs": r["pairs"],
                "rollouts": r["rollouts"],
                "rate_change_pct": round(r["rate_change"] * 100, 1),
                "statistic": "median of the pairs' changes; rounds: each pair's",
                "rates": r["rates"],
                "cpu_us": r["cpu_us"],
            },
            rounds=[
                round((on / off - 1) * 100, 1) for off, on in zip(r["cpu_us"]["off"], r["cpu_us"]["log"], strict=True)
            ],
        )
        for r in results
    ]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="shm,cs", help="comma-separated: shm, cs")
    parser.add_argument("--runners", default="1,2,4", help="comma-separated runner counts")
    parser.add_argument("--rollouts", type=int, default=0, help="rollouts per run (default: 3000 shm, 1500 cs)")
    parser.add_argument(
        "--warmup", type=int, default=50, help="warm-up rollouts per runner before the measurement (0: none)"
    )
    parser.add_argument("--overhead-rollouts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the overhead measurement (median)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument(
        "--shm-agent-loop",
        choices=["shared", "runner"],
        default="shared",
        help="shm: async agents on the process's shared loop (default) or on each runner's own loop",
    )
    parser.add_argument(
        "--progress-pairs", type=int, default=0, help="measure the progress poller: N runs off and N on, alternating"
    )
    parser.add_argument(
        "--progress-read-cost", default="", help="CPU per progress read on stores of these sizes (e.g. 1000,20000)"
    )
    add_json_argument(parser)
    args = parser.parse_args(argv)

    print(f"# trainer_loop: Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {_load():.2f}")
    print()
    if args.progress_read_cost:
        read_cost([int(value) for value in args.progress_read_cost.split(",")], reads=5)
        return 0
    if args.progress_pairs:
        modes = args.modes.split(",")
        counts = [int(value) for value in args.runners.split(",")]
        found = progress_pairs(modes, counts, args.rollouts, args.warmup, args.progress_pairs)
        write_results(args.json, progress_figures(found))
        return 0
    print(
        "| mode | runners | rollouts | succeeded | rollouts/s | CPU µs/rollout: main process | runner processes "
        "| total | fit wall time (s) | load average |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    measured: list[dict[str, Any]] = []
    for mode in args.modes.split(","):
        for runners in (int(value) for value in args.runners.split(",")):
            count = args.rollouts or (3000 if mode == "shm" else 1500)
            result = run_fit(mode, runners, count, args.warmup, shm_agent_loop=args.shm_agent_loop)
            measured.append({"mode": mode, "runners": runners, "rollouts": count, **result})
            main_us, children_us = result["cpu_main_us"], result["cpu_children_us"]
            print(
                f"| {mode} | {runners} | {count} | {result['succeeded']} | {result['rate']:,.0f} | "
                f"{main_us:,.0f} | {children_us:,.0f} | {main_us + children_us:,.0f} | {result['wall']:.2f} | "
                f"{_load():.2f} |",
                flush=True,
            )
    found = loop_figures(measured)
    if not args.skip_overhead:
        each_repeat = overhead(args.overhead_rollouts, args.repeats)
        figures = {name: statistics.median(values) for name, values in each_repeat.items()}
        found.append(
            Figure(
                key="trainer.runner_overhead_us",
                label="one rollout through LitAgentRunner with OtelTracer, beyond the store operations alone",
                value=round((figures["runner_otel"] - figures["bare"]) * 1e6),
                unit="µs",
                higher_is_better=False,
                detail={name: round(value * 1e6) for name, value in figures.items()}
                | {"statistic": "median with OtelTracer minus median of the store alone; rounds: each repeat's",
                   "repeats_us": {name: [round(v * 1e6) for v in values] for name, values in each_repeat.items()}},
                rounds=[round((otel - bare) * 1e6)
                        for bare, otel in zip(each_repeat["bare"], each_repeat["runner_otel"], strict=True)],
            )
        )  # fmt: skip
        print()
        print("| one rollout, in-process store, one runner | µs |")
        print("|---|---:|")
        print(f"| store operations alone (claim, reward span, status) | {figures['bare'] * 1e6:,.0f} |")
        print(f"| LitAgentRunner with DummyTracer | {figures['runner_dummy'] * 1e6:,.0f} |")
        print(f"| LitAgentRunner with OtelTracer | {figures['runner_otel'] * 1e6:,.0f} |")
        print(
            f"| overhead added by the runner (OtelTracer) | {(figures['runner_otel'] - figures['bare']) * 1e6:,.0f} |"
        )
    write_results(args.json, found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
