"""What a person sees in each view of the dashboard, opened in Chromium against a store holding a realistic run."""

from __future__ import annotations

import math
import re
from pathlib import Path

from .conftest import LoopThread, Page, ServedRun, heartbeat
from .run_data import PROMPT_V1, PROMPT_V2


def open_view(page: Page, run: ServedRun, route: str) -> object:
    browser_page = page.open(f"{run.url}/{route}")
    browser_page.wait_for_selector("body[data-refreshes]")
    return browser_page


def test_overview_counts_rollouts_by_status(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/")
    tile = view.locator('#status-tiles a[data-status="succeeded"] .tile-count')
    expected = len(run.data.succeeded) + 2  # the hostile and the wide rollouts also succeeded
    assert tile.inner_text() == str(expected)
    assert view.locator('#status-tiles a[data-status="queuing"] .tile-count').inner_text() == "1"
    assert view.locator('#status-tiles a[data-status="running"] .tile-count').inner_text() == "1"
    assert view.locator('#status-tiles a[data-status="requeuing"] .tile-count').inner_text() == "1"
    assert view.locator('#status-tiles a[data-status="failed"] .tile-count').inner_text() == "2"


def test_overview_charts_rewards_throughput_and_versions(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/")
    view.wait_for_selector("#reward-latest")
    rewarded = len(run.data.final_rewards) + 2
    assert view.locator("#reward-chart figure").get_attribute("data-points") == str(2 * rewarded)  # points + average
    assert int(view.locator("#throughput-chart figure").get_attribute("data-points") or 0) >= 1
    bars = view.locator("#reward-by-version .bar-row")
    assert bars.count() == 2
    assert run.data.resources_v1 in bars.nth(0).inner_text()  # oldest version first
    assert run.data.resources_v2 in bars.nth(1).inner_text()


def test_overview_groups_failure_reasons(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/")
    view.wait_for_selector("#failure-reasons table")
    reasons = view.locator("#failure-reasons td.reason").all_inner_texts()
    assert "KeyError: 'answer'" in reasons
    assert "Attempt timed out" in reasons
    assert "Cancelled" in reasons


def test_overview_counts_runners_alive(page: Page, run: ServedRun, loop_thread: LoopThread) -> None:
    heartbeat(loop_thread, run)
    view = open_view(page, run, "#/")
    text = view.locator("#runner-summary").inner_text()
    assert re.search(r"3\s+Alive", text), text
    assert re.search(r"1\s+Busy", text), text


def test_rollout_table_lists_newest_first_with_rewards(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/rollouts")
    rows = view.locator("#rollout-rows tr")
    assert rows.count() == 23
    assert rows.nth(0).get_attribute("data-key") == run.extra["wide"]
    row = view.locator(f'#rollout-rows tr[data-key="{run.data.proxied}"]')
    view.wait_for_function(
        "id => document.querySelector(`#rollout-rows tr[data-key='${id}'] .col-reward`).textContent === '0.8'",
        arg=run.data.proxied,
    )
    assert row.locator(".col-status").inner_text() == "succeeded"
    assert row.locator(".col-worker").inner_text() == "runner-1"
    assert "12 * 12" in row.locator(".col-input").inner_text()


def test_rollout_table_filters_by_status_on_the_server(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/rollouts")
    view.get_by_label("failed").check()
    view.wait_for_function("() => location.hash === '#/rollouts?status=failed'")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 2")
    keys = {row.get_attribute("data-key") for row in view.locator("#rollout-rows tr").all()}
    assert keys == {run.data.failed, run.data.timed_out}
    assert any("status_in=failed" in request.url for request in page.requests)


def test_rollout_table_filters_by_mode_and_id(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/rollouts?mode=val")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 1")
    assert view.locator("#rollout-rows tr").get_attribute("data-key") == run.data.timed_out
    fragment = run.data.multi_agent[3:9]
    view.get_by_label("Search rollout ids").fill(fragment)
    view.get_by_label("Mode").select_option("")
    view.wait_for_function("f => location.hash.includes('q=' + f) && !location.hash.includes('mode')", arg=fragment)
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 1")
    assert view.locator("#rollout-rows tr").get_attribute("data-key") == run.data.multi_agent
    assert any(f"rollout_id_contains={fragment}" in request.url for request in page.requests)


def test_rollout_table_sorts_and_pages_through_the_query_api(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/rollouts?size=25&sort=rollout_id&order=asc")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 23")
    ids = [row.get_attribute("data-key") for row in view.locator("#rollout-rows tr").all()]
    assert ids == sorted(ids)
    view.locator("th button", has_text="Rollout").click()  # same column again: descending
    view.wait_for_function("() => location.hash.includes('sort=rollout_id') && !location.hash.includes('order=asc')")
    view.wait_for_function("first => document.querySelector('#rollout-rows tr').dataset.key !== first", arg=ids[0])
    assert view.locator("#rollout-rows tr").first.get_attribute("data-key") == ids[-1]
    assert view.locator(".pager-range").inner_text() == "1\u201323 of 23"


def test_rollout_table_pages(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/rollouts?size=25&status=succeeded")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length > 0")
    total = len(run.data.succeeded) + 2
    assert view.locator(".pager-range").inner_text() == f"1\u2013{total} of {total}"
    view = open_view(page, run, "#/rollouts?page=3&size=25")
    view.wait_for_selector("#url-problems .notice")
    assert "past the last page" in view.locator("#url-problems").inner_text()


def test_rollout_table_filters_by_time_range(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/rollouts?sort=rollout_id")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 23")
    started = view.evaluate(
        "async () => (await (await fetch('v1/agl/rollouts?limit=-1')).json()).items.map(r => [r.rollout_id, r.start_time])"
    )
    start_times = sorted(time for _, time in started)
    low = f"{math.floor(start_times[5] * 1e6) / 1e6:.6f}"  # the bounds as the URL carries them
    high = f"{math.ceil(start_times[15] * 1e6) / 1e6:.6f}"
    expected = {rollout_id for rollout_id, time in started if float(low) <= time <= float(high)}
    assert len(expected) >= 11
    view = open_view(page, run, f"#/rollouts?from={low}&to={high}")
    view.wait_for_function("n => document.querySelectorAll('#rollout-rows tr').length === n", arg=len(expected))
    shown = [row.get_attribute("data-key") for row in view.locator("#rollout-rows tr").all()]
    assert set(shown) == expected
    assert "started from" in view.locator("#rollout-summary").inner_text()


def test_rollout_detail_shows_attempts_with_the_failure_traceback(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, f"#/rollouts/{run.data.retried}")
    view.wait_for_selector("#attempt-timeline .attempt-row")
    attempts = view.locator("#attempt-timeline .attempt-row")
    assert attempts.count() == 2
    first = attempts.nth(0).inner_text()
    assert "failed" in first and "runner-0" in first
    assert "ValueError: could not parse 'forty-two' as a number" in first
    assert "succeeded" in attempts.nth(1).inner_text() and "runner-1" in attempts.nth(1).inner_text()
    traceback = view.locator("#exception-summary pre.traceback").inner_text()
    assert "Traceback (most recent call last)" in traceback and "parse_answer" in traceback
    assert "Final reward 1" in view.locator("#reward-summary").inner_text()


def test_rollout_detail_waterfall_shows_the_multi_agent_trace(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, f"#/rollouts/{run.data.multi_agent}")
    view.wait_for_selector(".wf-row")
    assert view.locator(".wf-row").count() == 17
    names = view.locator(".wf-row .wf-name").all_inner_texts()
    assert {"planner", "coder", "run_code", "handoff to coder"} <= set(names)
    assert view.locator(".wf-row.kind-reward").count() == 2
    assert view.locator(".wf-row.kind-llm").count() == 6
    view.locator(".wf-row", has_text="run_code").first.click()
    panel = view.locator("#span-panel")
    panel.locator("text=tool.name").wait_for()
    assert "run_code" in panel.inner_text()
    assert f"span={view.locator('.wf-row.selected').get_attribute('data-key').split('/')[1]}" in view.evaluate(
        "location.hash"
    )


def test_waterfall_collapses_a_subtree(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, f"#/rollouts/{run.data.multi_agent}")
    view.wait_for_selector(".wf-row")
    view.locator(".wf-row", has_text="coder").filter(has_text="AGENT").locator(".wf-toggle").click()
    assert view.locator(".wf-row").count() == 17 - 8  # the coder's turns, calls, tool and reward are hidden
    view.get_by_role("button", name="Expand all").click()
    assert view.locator(".wf-row").count() == 17


def test_rollout_detail_shows_llm_calls_as_a_conversation(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, f"#/rollouts/{run.data.multi_agent}?tab=conversation")
    view.wait_for_selector("#conversation-pane .llm-call")
    calls = view.locator("#conversation-pane .llm-call")
    assert calls.count() == 3  # the SDK's chat completions; the agent framework's wrapper spans are not repeated
    first = calls.nth(0).inner_text()
    assert "agent planner" in first
    assert "Plan, then hand off." in first and "build a sorter" in first
    assert "→ transfer_to_coder" in first
    assert "48 prompt + 30 completion = 78 tokens" in first
    assert "token ids captured (48 prompt / 30 response)" in first
    assert "agent coder" in calls.nth(1).inner_text()
    rewards = view.locator("#conversation-pane .reward-event").all_inner_texts()
    assert rewards == ["★ Reward 0.5", "★ Reward 1"]


def test_proxy_calls_show_their_token_ids_and_tools(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, f"#/rollouts/{run.data.proxied}?tab=conversation")
    view.wait_for_selector("#conversation-pane .llm-call")
    text = view.locator("#conversation-pane .llm-call").inner_text()
    assert "SmolLM2-135M-Instruct" in text
    assert "token ids captured (27 prompt / 3 response)" in text
    assert "1 tool offered: calculator" in text
    assert "144" in view.locator("#conversation-pane .msg.out").inner_text()
    assert "Reward 0.8 (primary 0.8, correct 1)" in view.locator("#conversation-pane .reward-event").inner_text()


def test_rollout_without_attempts_says_it_is_queued(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, f"#/rollouts/{run.data.queued}")
    view.wait_for_selector("#attempt-timeline .empty")
    assert "waiting in the queue" in view.locator("#attempt-timeline").inner_text()
    assert view.locator(".spans-panel").is_hidden()


def test_unknown_rollout_says_not_found(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/rollouts/ro-does-not-exist")
    view.wait_for_selector(".not-found h1")
    assert "ro-does-not-exist" in view.locator(".not-found").inner_text()


def test_resources_diff_two_prompt_versions(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, "#/resources")
    view.wait_for_selector("#resources-compare .resource-diff")
    rows = view.locator("#resources-list tbody tr")
    assert rows.count() == 2
    assert "latest" in rows.nth(0).inner_text() and run.data.resources_v2 in rows.nth(0).inner_text()
    prompt = view.locator('#resources-compare .resource-diff[data-name="prompt"]')
    assert "2 changed" in prompt.locator(".diff-summary").inner_text()
    assert prompt.locator("mark.ins-word").all_inner_texts()[:1] == ["careful"]
    assert PROMPT_V1.splitlines()[2] in prompt.locator(".diff-equal").inner_text()
    assert PROMPT_V2.splitlines()[0] == prompt.locator(".diff-change td.new").first.inner_text()
    llm = view.locator('#resources-compare .resource-diff[data-name="llm"]').inner_text()
    assert "sk-do-not-show-this-key" not in view.locator("body").inner_text()
    assert "hidden" in llm


def test_resources_compare_is_chosen_in_the_url(page: Page, run: ServedRun) -> None:
    view = open_view(page, run, f"#/resources?a={run.data.resources_v2}&b={run.data.resources_v2}")
    view.wait_for_selector("#resources-compare")
    view.locator("#resources-compare").get_by_text("Only one version").wait_for()
    view.locator(f'tr[data-resources-id="{run.data.resources_v1}"] button', has_text="A").click()
    view.wait_for_function("id => location.hash.includes('a=' + id)", arg=run.data.resources_v1)
    view.locator('#resources-compare .resource-diff[data-name="prompt"] mark').first.wait_for()


def test_runners_show_status_current_rollout_and_system_use(
    page: Page, run: ServedRun, loop_thread: LoopThread
) -> None:
    heartbeat(loop_thread, run)
    view = open_view(page, run, "#/runners")
    view.wait_for_selector("#runner-rows tr")
    busy = view.locator('#runner-rows tr[data-key="runner-2"]')
    assert "busy" in busy.locator(".col-status").inner_text()
    assert run.data.running in busy.locator(".col-rollout").inner_text()
    assert busy.locator(".col-cpu").inner_text() == "70%"
    assert busy.locator(".col-memory").inner_text().startswith("64%")
    assert re.search(r"(just now|\d+ s ago)", busy.locator(".col-heartbeat").inner_text())
    assert busy.get_attribute("data-health") == "alive"
    assert "3 runners" in view.locator("#runner-counts").inner_text()


def test_screenshots_of_every_view(page: Page, run: ServedRun, screenshots: Path) -> None:
    shots = {
        "overview": "#/",
        "rollouts": "#/rollouts",
        "rollout-trace": f"#/rollouts/{run.data.multi_agent}",
        "rollout-failed-attempt": f"#/rollouts/{run.data.retried}",
        "rollout-conversation": f"#/rollouts/{run.data.multi_agent}?tab=conversation",
        "resources": "#/resources",
        "runners": "#/runners",
    }
    for name, route in shots.items():
        view = open_view(page, run, route)
        view.wait_for_load_state("networkidle")
        if name == "rollout-trace":
            view.locator(".wf-row", has_text="openai.chat.completion").first.click()
        path = screenshots / f"dashboard-{name}.png"
        view.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000
