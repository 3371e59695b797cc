"""A GRPO run's health on the Overview: the warnings that hold, the verdict and each recent step's record, read from
the run's bookkeeping rollout (agentlightning/algorithm/grpo/reporting/health_store.py); hidden for a run without one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentlightning.algorithm.grpo.reporting.health_store import POINTER_KEY, HealthRecordWriter
from agentlightning.store import InMemoryLightningStore, LightningStore

from .conftest import LoopThread, Page, ServedRun, open_page, serve
from .run_data import RunData
from .test_views import open_view

COLLAPSE = {
    "code": "tool_collapse",
    "message": "95% of the last 40 tool calls pick 'add' (of 2 tools): the policy is collapsing onto one action.",
    "fix": "Try balanced steps (balance_by) or a lower learning rate.",
    "since": 2,
}


def _step(step: int, top_share: float, warnings: list[dict[str, Any]]) -> dict[str, Any]:
    tools = {"calls": 20, "valid": 19, "validity": 0.95, "top_tool": "add", "top_share": top_share}
    health = {
        "step": step,
        "reward_mean": 0.5,
        "informative_share": 0.75,
        "entropy": 1.25,
        "tool_calls": tools,
        "truncation_rate": None,
        "sampler_gap_mean": None,
        "reward_by_stratum": {"product": 0.0, "sum": 1.0},
    }
    return {"step": step, "health": health, "warnings": warnings}


async def _grpo_run(store: LightningStore) -> str:
    """Three steps of a collapsing run, and one finished rollout that names the record."""
    history = [_step(1, 0.6, []), _step(2, 0.95, [COLLAPSE]), _step(3, 0.97, [COLLAPSE])]
    writer = HealthRecordWriter(store)
    record_id = await writer.save(history)
    assert record_id is not None
    rollout = await store.start_rollout({"id": 1}, mode="train", metadata={"grpo": {"step": 3, POINTER_KEY: record_id}})
    await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
    return record_id


@pytest.fixture(scope="module")
def grpo_run(loop_thread: LoopThread) -> Iterator[ServedRun]:
    store = InMemoryLightningStore()
    loop_thread.run(_grpo_run(store))
    served = serve(loop_thread, store, RunData())
    try:
        yield served
    finally:
        loop_thread.run(served.server.stop())


def test_the_overview_shows_the_active_warning_and_each_steps_health(page: Page, grpo_run: ServedRun) -> None:
    view: Any = open_view(page, grpo_run, "#/")
    view.wait_for_selector("#health table.health-steps")
    warning = view.locator("#health-warnings .health-warning")
    assert warning.count() == 1 and warning.get_attribute("data-code") == "tool_collapse"
    assert "95% of the last 40 tool calls pick 'add'" in warning.inner_text()
    assert "balanced steps" in warning.inner_text()
    rows = view.locator("#health table.health-steps tbody tr")
    assert rows.count() == 3
    newest = rows.nth(0).locator("td").all_inner_texts()
    assert newest[:5] == ["3", "0.5", "75%", "1.25", "add 97% · valid 95%"]
    assert newest[7:] == ["product 0, sum 1", "tool_collapse"]
    assert rows.nth(2).locator("td").all_inner_texts()[-1] == ""


def test_the_overview_hides_the_health_panel_for_a_run_without_one(page: Page, run: ServedRun) -> None:
    view: Any = open_view(page, run, "#/")
    view.wait_for_selector("#reward-latest")
    assert view.locator("#health").is_hidden()


@pytest.fixture(scope="module")
def js(browser: Any, grpo_run: ServedRun) -> Iterator[Any]:
    page = next(pages := open_page(browser))
    view = page.open(f"{grpo_run.url}/#/not-a-view")
    view.wait_for_selector("main h1")

    def call(body: str, arg: Any = None) -> Any:
        script = f"async (arg) => {{ const m = await import('/dashboard/js/views/health.js'); {body} }}"
        return view.evaluate(script, arg)

    yield call
    next(pages, None)


def test_the_record_is_found_through_the_first_rollout_that_names_one(js: Any) -> None:
    rollouts = [
        {"metadata": None},
        {"metadata": {"grpo": {"step": 1}}},
        {"metadata": {"grpo": {"health_record": "ro-7"}}},
    ]
    assert js("return m.healthRecordId(arg);", rollouts) == "ro-7"
    assert js("return m.healthRecordId(arg);", rollouts[:2]) is None
    assert js("return m.healthRecordId(arg);", []) is None


def test_health_rows_are_newest_first_with_missing_values_as_dashes(js: Any) -> None:
    steps = [{"step": s, "informative_share": 0.5, "warnings": []} for s in range(1, 26)]
    steps[-1] = {"step": 25, "entropy": 0.12345, "truncation_rate": 0.4, "warnings": ["truncation"]}
    rows = js("return m.healthRows({steps: arg}, 20);", steps)
    assert [row["step"] for row in rows] == [str(s) for s in range(25, 5, -1)]
    newest = rows[0]
    assert (newest["entropy"], newest["truncated"], newest["informative"]) == ("0.1235", "40%", "—")
    assert (newest["tools"], newest["strata"], newest["gap"], newest["warnings"]) == ("—", "—", "—", "truncation")
    assert js("return m.healthRows(null);") == []
