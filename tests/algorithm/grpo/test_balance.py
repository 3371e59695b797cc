"""Balanced steps (`GRPO(balance_by=...)`): each step draws its tasks evenly across the dataset's strata, as a pure
function of the stream's cursor (deterministic, resumable), with a clear error naming a task `balance_by` fails on."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentlightning.algorithm.grpo.sampling.balance import balanced_tasks_at, stratify, stratum_counts
from agentlightning.algorithm.grpo.sampling.task_stream import TaskStream

KINDS = ["a"] * 9 + ["b"] * 2 + ["c"] * 4  # strata of 9, 2 and 4 tasks, interleaved below
DATASET = [{"id": i, "kind": kind} for i, kind in enumerate(KINDS[::2] + KINDS[1::2])]


def kind_of(task: dict[str, Any]) -> str:
    return task["kind"]


def _kinds(indices: list[int]) -> list[str]:
    return [DATASET[i]["kind"] for i in indices]


def test_every_window_of_as_many_tasks_as_strata_holds_each_stratum_once() -> None:
    strata = stratify(DATASET, kind_of, seed=0)
    for cursor in range(0, 40):  # whatever the cursor (extra tasks move it by any amount)
        assert sorted(_kinds(balanced_tasks_at(strata, 0, cursor, 3))) == ["a", "b", "c"], cursor


def test_a_step_holds_each_stratum_as_evenly_as_its_size_allows() -> None:
    strata = stratify(DATASET, kind_of, seed=3)
    for cursor in range(0, 30):
        counts = Counter(_kinds(balanced_tasks_at(strata, 3, cursor, 4)))
        assert sorted(counts.values()) == [1, 1, 2], cursor


def test_each_pass_over_a_stratum_draws_each_of_its_tasks_once() -> None:
    strata = stratify(DATASET, kind_of, seed=1)
    drawn = balanced_tasks_at(strata, 1, 0, 3 * 36)  # 36 draws per stratum: 4 passes over a, 18 over b, 9 over c
    for kind, size in (("a", 9), ("b", 2), ("c", 4)):
        of_kind = [i for i in drawn if DATASET[i]["kind"] == kind]
        for start in range(0, len(of_kind), size):
            assert sorted(of_kind[start : start + size]) == sorted(
                i for i, task in enumerate(DATASET) if task["kind"] == kind
            )


def test_the_stream_is_the_same_for_a_seed_and_continues_from_any_cursor() -> None:
    strata = stratify(DATASET, kind_of, seed=5)
    whole = balanced_tasks_at(strata, 5, 0, 25)
    assert whole == balanced_tasks_at(stratify(DATASET, kind_of, seed=5), 5, 0, 25)
    assert whole == balanced_tasks_at(strata, 5, 0, 7) + balanced_tasks_at(strata, 5, 7, 11) + balanced_tasks_at(
        strata, 5, 18, 7
    )
    other = stratify(DATASET, kind_of, seed=6)
    assert balanced_tasks_at(other, 6, 0, 25) != whole


def test_stratum_counts_name_each_stratum_by_its_value() -> None:
    strata = stratify(DATASET, kind_of, seed=0)
    indices = [i for i, task in enumerate(DATASET) if task["kind"] != "b"][:5]
    assert stratum_counts(strata, indices) == dict(Counter(_kinds(indices)))


def test_a_balance_by_that_raises_names_the_task() -> None:
    tasks = [{"kind": "a"}, {"kind": "b"}, {"other": 1}]
    with pytest.raises(ValueError, match=r"balance_by raised on training task 2: KeyError\('kind'\)"):
        stratify(tasks, kind_of, seed=0)


def test_an_unhashable_stratum_is_a_type_error_naming_the_task() -> None:
    tasks = [{"kind": "a"}, {"kind": ["b"]}]
    with pytest.raises(TypeError, match=r"unhashable list for training task 1 \(\['b'\]\)"):
        stratify(tasks, kind_of, seed=0)


def test_grpo_refuses_a_balance_by_that_is_not_callable() -> None:
    pytest.importorskip("torch")
    from agentlightning.algorithm.grpo import GRPO

    with pytest.raises(TypeError, match="balance_by must be a callable"):
        GRPO(balance_by="kind")  # type: ignore[arg-type]


def test_grpo_stops_on_a_bad_balance_by_before_building_the_policy(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from agentlightning.algorithm.grpo import GRPO
    from agentlightning.inference.tiny import build_tiny_engine

    algorithm = GRPO(engine=build_tiny_engine(seed=0), output_dir=tmp_path / "run", balance_by=kind_of)
    with pytest.raises(ValueError, match="training task 1"):
        asyncio.run(algorithm.run([{"kind": "a"}, {"id": 1}]))
    assert algorithm.policy is None


def test_each_grpo_step_draws_its_tasks_evenly_across_the_strata(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import agentlightning as agl
    from agentlightning.algorithm.grpo import GRPO
    from agentlightning.inference.tiny import build_tiny_engine

    from .agents import quirky_agent

    train = [{"id": i, "kind": "random", "stratum": "big"} for i in range(6)]
    train += [{"id": 6 + i, "kind": "random", "stratum": "small"} for i in range(2)]
    algorithm = GRPO(
        engine=build_tiny_engine(seed=0),
        output_dir=tmp_path / "run",
        group_size=2,
        tasks_per_step=2,
        informative_groups=0,
        max_steps=3,
        learning_rate=3e-2,
        balance_by=by_stratum,
    )
    agl.Trainer(algorithm=algorithm, n_runners=2, strategy="cs", progress="off").fit(quirky_agent, train)
    assert [entry["strata"] for entry in algorithm.history] == [{"big": 1, "small": 1}] * 3


def by_stratum(task: dict[str, Any]) -> str:
    return task["stratum"]


def test_the_task_stream_draws_from_the_balanced_stream_at_its_restored_cursor() -> None:
    strata = stratify(DATASET, kind_of, seed=4)
    stream = TaskStream(len(DATASET), 4, strata=strata, cursor=7)  # as GRPO's resume restores it from a checkpoint
    assert stream.take(3) + stream.take(2) == balanced_tasks_at(strata, 4, 7, 5)
    assert stream.cursor == 12
