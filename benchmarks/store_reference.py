"""The store side by side with the reference: the same workloads against this package and agentlightning 0.3.0.

    .venv/bin/python benchmarks/store_reference.py                       # every workload, 3 rounds
    .venv/bin/python benchmarks/store_reference.py --quick --json runs/store_reference.json
    .venv/bin/python benchmarks/store_reference.py --workloads micro-worker --transports memory --rounds 5

The reference is installed from the package registry into its own virtual environment (`--peer-venv`, by default
runs/peer-venv/agl-0.3.0; reused when it already holds agentlightning 0.3.0), with its own dependencies. Each
workload of `benchmarks/_store_workloads.py` then runs in a fresh interpreter of each package, interleaved (ours
then the reference's, the order swapped every round, so that the load of a shared machine hits both alike), for
`--rounds` rounds. Reported: the median over the rounds of each side, and the ratio (>1: ours is better).

Transports: `memory` (InMemoryLightningStore called in the workload's process) and `http` (the same store served by
LightningStoreServer from a child process, called through LightningStoreClient): both packages have both, with the
same constructor arguments. The trainer loop runs `Trainer.fit` with the client-server strategy ("cs") of each
package and its default store; it is reported with start-up included (the whole `fit`) and at steady state (the
rollouts that finished after the first half did, by the store's end times: `_store_workloads.steady_rate`). Not
compared: the durable backends (the reference 0.3.0 has MongoDB only, with an
SQLite stub; ours has SQLite and PostgreSQL and no MongoDB) and `agl store --workers N` (the reference's
multi-process server needs a zero-copy store, which its in-memory store is not).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from _results import REPO, Figure, Peer, add_json_argument, load_average, write_results

PEER_NAME = "agentlightning 0.3.0"
PEER_REQUIREMENT = "agentlightning==0.3.0"
WORKLOAD_SCRIPT = Path(__file__).resolve().parent / "_store_workloads.py"
#: The workloads' working directory (the reference writes an agentops.log where it runs).
SCRATCH = REPO / "runs" / "store_reference"


@dataclass(frozen=True)
class Case:
    """One workload on one transport, with its arguments, and the metrics that become figures."""

    workload: str
    transport: str
    arguments: tuple[str, ...]
    # (metric in the workload's output, figure key suffix, label, unit, higher is better, target in words or None)
    metrics: tuple[tuple[str, str, str, str, bool, Optional[str]], ...]

    @property
    def name(self) -> str:
        return f"{self.workload} ({self.transport})"


@dataclass
class Samples:
    ours: list[dict[str, Any]] = field(default_factory=list)
    peer: list[dict[str, Any]] = field(default_factory=list)


def _cases(quick: bool, transports: list[str], workloads: list[str]) -> list[Case]:
    scale = 1 if quick else 2
    rollout_metrics = (
        ("rollouts_per_s", "micro_rollout_per_s", "micro-rollout: rollouts/s", "rollouts/s", True, None),
        ("rollout_p99_ms", "micro_rollout_p99_ms", "micro-rollout: p99 per rollout", "ms", False, "< 300 ms"),
        ("rollout_p50_ms", "micro_rollout_p50_ms", "micro-rollout: p50 per rollout", "ms", False, None),
    )
    worker_metrics = (
        ("operations_per_s", "micro_worker_ops_per_s", "micro-worker: operations/s", "ops/s", True, None),
        ("operation_p99_ms", "micro_worker_p99_ms", "micro-worker: p99 per operation", "ms", False, None),
        ("heartbeat_p99_ms", "micro_worker_heartbeat_p99_ms", "micro-worker: p99 per heartbeat", "ms", False, None),
        ("snapshot_p99_ms", "micro_worker_snapshot_p99_ms", "micro-worker: p99 per snapshot", "ms", False, None),
    )
    cases: list[Case] = []
    for transport in transports:
        rollouts = (1000 if transport == "memory" else 200) * scale
        cases += [
            Case(
                "micro-rollout",
                transport,
                ("--workers", "32", "--rollouts", str(rollouts), "--spans", "4"),
                rollout_metrics,
            ),
            Case(
                "micro-dequeue-only",
                transport,
                ("--workers", "32", "--rollouts", str(rollouts * 2)),
                (
                    (
                        "dequeues_per_s",
                        "micro_dequeue_per_s",
                        "micro-dequeue-only: dequeues/s",
                        "dequeues/s",
                        True,
                        None,
                    ),
                ),
            ),
            Case(
                "micro-worker",
                transport,
                ("--workers", "32", "--readers", "2", "--rollouts", "1000", "--seconds", str(2 * scale)),
                worker_metrics,
            ),
        ]
    cases.append(
        Case(
            "trainer-loop",
            "cs",
            ("--runners", "2", "--rollouts", str(200 * scale), "--strategy", "cs"),
            (
                (
                    "rollouts_per_s",
                    "trainer_loop_rollouts_per_s",
                    "Trainer loop (no-op agent, 2 runners, start-up included): rollouts/s",
                    "rollouts/s",
                    True,
                    None,
                ),
                (
                    "steady_rollouts_per_s",
                    "trainer_loop_steady_rollouts_per_s",
                    "Trainer loop (no-op agent, 2 runners, steady state: the second half of the rollouts): rollouts/s",
                    "rollouts/s",
                    True,
                    None,
                ),
            ),
        )
    )
    return [case for case in cases if case.workload in workloads]


# ------------------------------------------------------------------------------------------------ the peer venv
def _installed_version(python: Path) -> Optional[str]:
    """The agentlightning version the venv itself holds.

    Isolated mode (-I) for the probe and for pip: `run_all.py` puts this checkout, whose agentlightning is also 0.3.0,
    on PYTHONPATH and runs from it, and either would show them this checkout's package as the reference."""
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-I", "-c", "import importlib.metadata as m; print(m.version('agentlightning'))"],
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_peer_venv(venv: Path) -> Path:
    """The interpreter of a venv holding agentlightning 0.3.0 from the registry (created and installed if needed)."""
    python = venv / "bin" / "python"
    wanted = PEER_REQUIREMENT.split("==", 1)[1]
    if _installed_version(python) == wanted:
        return python
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "agentlightning"], capture_output=True, text=True
    )
    if listed.returncode == 0 and wanted not in listed.stdout.replace(",", " ").split():
        raise SystemExit(f"the package registry does not list {PEER_REQUIREMENT}: {listed.stdout.strip()!r}")
    print(f"installing {PEER_REQUIREMENT} into {venv} (its own dependencies; a few minutes the first time)")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-I", "-m", "pip", "install", "--quiet", PEER_REQUIREMENT], check=True)
    if _installed_version(python) != wanted:
        raise SystemExit(f"{venv} does not hold {PEER_REQUIREMENT} after installing it")
    return python


# ------------------------------------------------------------------------------------------------------ running
def run_case(python: Path, case: Case, timeout: float) -> dict[str, Any]:
    """Run one workload in a fresh interpreter; its last output line is the JSON result."""
    command = [str(python), str(WORKLOAD_SCRIPT), case.workload, *case.arguments]
    if case.transport in ("memory", "http"):
        command += ["--transport", case.transport]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # the reference imports litellm, which otherwise fetches a price list
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=str(SCRATCH), env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"{case.name} failed under {python} (exit {done.returncode}):\n{done.stderr[-3000:]}{done.stdout[-1000:]}"
        )
    return json.loads(lines[-1])


def _median(samples: list[dict[str, Any]], metric: str) -> float:
    return float(statistics.median(float(sample[metric]) for sample in samples))


def figures_of(case: Case, samples: Samples) -> list[Figure]:
    figures: list[Figure] = []
    prefix = "peer.store." if case.transport in ("memory", "cs") else f"peer.store.{case.transport}."
    for metric, suffix, label, unit, higher, target in case.metrics:
        ours = _median(samples.ours, metric)
        peer = _median(samples.peer, metric)
        met = None
        if target is not None and target.startswith("< "):
            met = ours < float(target[2:].split()[0])
        figures.append(
            Figure(
                key=prefix + suffix,
                label=f"{label} ({case.transport})",
                value=round(ours, 2),
                unit=unit,
                target=target,
                met=met,
                higher_is_better=higher,
                peer=Peer(PEER_NAME, round(peer, 2), [sample[metric] for sample in samples.peer]),
                detail={
                    "rounds": len(samples.ours),
                    "arguments": " ".join(case.arguments),
                    "statistic": "median over rounds",
                },
                rounds=[sample[metric] for sample in samples.ours],
            )
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller workloads (about 10 minutes on 2 shared cores)")
    parser.add_argument("--transports", default="memory,http", help="comma-separated: memory, http")
    parser.add_argument(
        "--workloads", default="micro-rollout,micro-dequeue-only,micro-worker,trainer-loop", help="comma-separated"
    )
    parser.add_argument("--peer-venv", type=Path, default=REPO / "runs" / "peer-venv" / "agl-0.3.0")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for one workload run")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    transports = [name for name in args.transports.split(",") if name]
    workloads = [name for name in args.workloads.split(",") if name]
    unknown = sorted(set(transports) - {"memory", "http"}) + sorted(
        set(workloads) - {"micro-rollout", "micro-dequeue-only", "micro-worker", "trainer-loop"}
    )
    if unknown:
        parser.error(f"unknown transports or workloads: {', '.join(unknown)}")

    peer_python = ensure_peer_venv(args.peer_venv)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    ours_python = Path(sys.executable)
    cases = _cases(args.quick, transports, workloads)
    samples = {case: Samples() for case in cases}
    failures: list[str] = []
    started = time.monotonic()
    for round_index in range(args.rounds):
        for case in cases:
            sides = [("ours", ours_python), ("peer", peer_python)]
            if round_index % 2:
                sides.reverse()
            for side, python in sides:
                try:
                    result = run_case(python, case, args.timeout)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:  # one failed run must not lose the others
                    failures.append(f"round {round_index + 1} {case.name} {side}: {str(exc)[-500:]}")
                    print(f"round {round_index + 1} {case.name} {side} FAILED: {str(exc)[-2000:]}", flush=True)
                    continue
                getattr(samples[case], side).append(result)
                print(f"round {round_index + 1} {case.name} {side}: {json.dumps(result)}", flush=True)

    figures = [
        figure
        for case in cases
        if samples[case].ours and samples[case].peer
        for figure in figures_of(case, samples[case])
    ]
    print(f"\n{args.rounds} rounds in {time.monotonic() - started:.0f} s, load average now {load_average()}")
    print(f"{'figure':<78} {'ours':>10} {'0.3.0':>10} {'ratio':>7}")
    for figure in figures:
        assert figure.peer is not None
        ratio = f"{figure.ratio:.2f}x" if figure.ratio is not None else "-"
        print(f"{figure.label:<78} {figure.value:>10.1f} {figure.peer.value:>10.1f} {ratio:>7}")
    for failure in failures:
        print(f"failed: {failure.splitlines()[0] if failure else failure}")
    write_results(
        args.json, figures, extra={"peer_venv": str(args.peer_venv), "rounds": args.rounds, "failures": failures}
    )
    if failures:  # what did run is written; the run as a whole did not measure everything it was asked to
        raise SystemExit(f"{len(failures)} of {len(cases) * args.rounds * 2} workload runs failed (listed above)")


if __name__ == "__main__":
    main()
