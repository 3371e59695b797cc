"""The side-by-side store harness (benchmarks/store_reference.py): its workloads run against this package and
finish every rollout, and its figures are the medians over rounds with the reference as the peer."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
WORKLOADS = BENCHMARKS / "_store_workloads.py"


def run_workload(*arguments: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(WORKLOADS), *arguments], capture_output=True, text=True, timeout=180, cwd=BENCHMARKS
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"exit {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(lines[-1])


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the harness imports its sibling _results.py
    return importlib.import_module("store_reference")


def test_micro_rollout_finishes_every_rollout_in_memory() -> None:
    result = run_workload("micro-rollout", "--workers", "4", "--rollouts", "40", "--spans", "2")
    assert result["rollouts_per_s"] > 0
    assert 0 < result["rollout_p50_ms"] <= result["rollout_p99_ms"] <= result["rollout_max_ms"]


def test_micro_worker_reports_heartbeats_and_snapshots_over_http() -> None:
    result = run_workload(
        "micro-worker", "--transport", "http", "--workers", "4", "--readers", "1", "--rollouts", "20", "--seconds", "1"
    )
    assert result["heartbeats_per_s"] > 0 and result["snapshots_per_s"] > 0
    assert result["operations_per_s"] == pytest.approx(result["heartbeats_per_s"] + result["snapshots_per_s"], 0.01)


def test_figures_are_medians_over_rounds_with_the_reference_as_peer(harness: Any) -> None:
    case = next(
        case for case in harness._cases(True, ["memory"], ["micro-rollout"]) if case.workload == "micro-rollout"
    )
    samples = harness.Samples(
        ours=[{"rollouts_per_s": v, "rollout_p99_ms": 10.0, "rollout_p50_ms": 1.0} for v in (300.0, 100.0, 200.0)],
        peer=[{"rollouts_per_s": v, "rollout_p99_ms": 40.0, "rollout_p50_ms": 2.0} for v in (50.0, 70.0, 60.0)],
    )
    figures = {figure.key: figure for figure in harness.figures_of(case, samples)}
    throughput = figures["peer.store.micro_rollout_per_s"]
    assert throughput.value == 200.0 and throughput.peer.value == 60.0
    assert throughput.peer.name == "agentlightning 0.3.0"
    assert throughput.ratio == pytest.approx(200 / 60)
    tail = figures["peer.store.micro_rollout_p99_ms"]
    assert not tail.higher_is_better and tail.ratio == pytest.approx(4.0) and tail.met is True


def test_http_figures_carry_the_transport_in_their_key(harness: Any) -> None:
    (case,) = harness._cases(True, ["http"], ["micro-worker"])
    samples = harness.Samples(ours=[_worker_sample()], peer=[_worker_sample()])
    keys = {figure.key for figure in harness.figures_of(case, samples)}
    assert {"peer.store.http.micro_worker_ops_per_s", "peer.store.http.micro_worker_p99_ms"} <= keys


def _worker_sample() -> dict[str, float]:
    return {
        "operations_per_s": 100.0,
        "operation_p99_ms": 5.0,
        "heartbeat_p99_ms": 4.0,
        "snapshot_p99_ms": 9.0,
    }


def test_the_peer_venv_probe_ignores_a_checkout_on_pythonpath(
    harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_all.py puts this checkout (agentlightning, also version 0.3.0) on PYTHONPATH; the probe of the peer venv
    must not take it for the registry's package, or the venv is never installed and every peer run fails."""
    import venv

    venv.create(tmp_path / "peer", with_pip=False)
    python = tmp_path / "peer" / "bin" / "python"
    checkout = tmp_path / "checkout"
    (checkout / "agentlightning-0.3.0.dist-info").mkdir(parents=True)
    (checkout / "agentlightning-0.3.0.dist-info" / "METADATA").write_text("Name: agentlightning\nVersion: 0.3.0\n")
    monkeypatch.setenv("PYTHONPATH", str(checkout))
    seen_plainly = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('agentlightning'))"],
        capture_output=True,
        text=True,
    )
    assert seen_plainly.stdout.strip() == "0.3.0"  # what fooled the earlier probe
    assert harness._installed_version(python) is None
