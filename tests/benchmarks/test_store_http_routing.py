"""The routing comparison keeps the store's dispatcher only when it is more than 5 % ahead of Starlette's router,
and skips a workload that did not run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import store_http_routing  # noqa: E402  # pyright: ignore[reportMissingImports]


def _runs(*rates: float) -> list[dict[str, float]]:
    return [{"rollouts/s": rate, "client p50 ms": 1.0, "CPU ms/rollout": 1.0} for rate in rates]


@pytest.mark.parametrize(("starlette", "met"), [((97.0, 95.0), False), ((90.0, 92.0), True), ((120.0, 110.0), False)])
def test_the_dispatcher_meets_the_target_only_more_than_five_percent_ahead_of_starlette(
    starlette: tuple[float, float], met: bool
) -> None:
    results = {("memory", "dispatcher"): _runs(100.0, 100.0), ("memory", "starlette"): _runs(*starlette)}
    (figure,) = store_http_routing.comparison_figures(results)
    assert figure.key == "store.http.routing.memory.rollouts_per_s" and figure.value == 100.0
    assert figure.met is met
    assert figure.peer is not None and figure.peer.rounds == list(starlette)
    assert figure.rounds == [100.0, 100.0]


def test_a_workload_that_did_not_run_has_no_figure() -> None:
    results = {("memory", "dispatcher"): _runs(100.0), ("memory", "starlette"): _runs(99.0)}
    assert [f.key for f in store_http_routing.comparison_figures(results)] == [
        "store.http.routing.memory.rollouts_per_s"
    ]
