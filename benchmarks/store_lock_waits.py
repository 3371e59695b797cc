"""How often runner threads wait for the store's transaction lock in shm mode, per rollout.

    .venv/bin/python benchmarks/store_lock_waits.py                      # 4 runner threads, 3 runs
    .venv/bin/python benchmarks/store_lock_waits.py --runners 1,2,4 --runs 5

Runs `Trainer.fit` as `trainer_loop.py` does (shm mode, no-op agent, without the warm-up) and counts, per rollout,
the acquisitions of `TransactionLock` that took over 50 µs (they waited for another thread; a free lock takes about
1 µs) and their mean wait. A lock convoy shows as a large share of the acquisitions waiting, each far longer than a
transaction takes, and the CPU per rollout up by half or more. A few long waits in total (the algorithm enqueueing
every rollout in one transaction) are normal; the mean wait is then large while the waits per rollout round to 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import trainer_loop

from agentlightning.store.core import concurrency

_WAITED = 50e-6
"""An acquisition that took longer than this waited for another thread (a free lock is taken in about 1 µs)."""


class _Counts:
    def __init__(self) -> None:
        self.free = 0
        self.waited = 0
        self.wait_seconds = 0.0


def _instrument(counts: _Counts) -> None:
    original = concurrency.TransactionLock.acquire

    def acquire(self: Any) -> None:
        started = time.perf_counter()
        original(self)
        waited = time.perf_counter() - started
        if waited < _WAITED:
            counts.free += 1
        else:
            counts.waited += 1
            counts.wait_seconds += waited

    concurrency.TransactionLock.acquire = acquire  # type: ignore[method-assign]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runners", default="4", help="comma-separated runner thread counts")
    parser.add_argument("--rollouts", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    counts = _Counts()
    _instrument(counts)
    print(
        "| runner threads | run | rollouts/s | CPU µs/rollout | lock acquisitions/rollout | of which waited "
        "| mean wait µs | load average |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for runners in (int(value) for value in args.runners.split(",")):
        for run in range(1, args.runs + 1):
            counts.free, counts.waited, counts.wait_seconds = 0, 0, 0.0
            result = trainer_loop.run_fit("shm", runners, args.rollouts)  # no warm-up: every acquisition counts
            total = counts.free + counts.waited
            mean_wait = counts.wait_seconds / counts.waited * 1e6 if counts.waited else 0.0
            print(
                f"| {runners} | {run} | {result['rate']:,.0f} | {result['cpu_main_us']:,.0f} | "
                f"{total / args.rollouts:.2f} | {counts.waited / args.rollouts:.2f} | {mean_wait:,.0f} | "
                f"{os.getloadavg()[0]:.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
