"""Bad input and bad weather: a server that goes away and comes back, malformed URLs, huge attributes, unknown
span kinds, and a run that keeps changing while someone is reading it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import agentlightning as agl
from agentlightning.store import InMemoryLightningStore
from agentlightning.store.client_server import LightningStoreServer
from agentlightning.types import Span, TraceStatus

from .conftest import LoopThread, Page, ServedRun, serve
from .run_data import RunData, add_spans


@pytest.fixture
def live_run(loop_thread: LoopThread) -> Iterator[ServedRun]:
    """A store server of its own (tests change it while the page is open)."""
    store = InMemoryLightningStore()
    served = serve(loop_thread, store, RunData())
    try:
        yield served
    finally:
        loop_thread.run(served.server.stop())


def fast_refresh(view: object) -> None:
    view.get_by_label("Refresh interval").select_option("2")  # type: ignore[attr-defined]


def test_a_server_that_goes_away_is_reported_and_the_page_recovers_by_itself(
    page: Page, live_run: ServedRun, loop_thread: LoopThread
) -> None:
    page.console.allow(r"Failed to load resource: net::ERR_CONNECTION_REFUSED")
    loop_thread.run(live_run.store.enqueue_rollout({"task": "before the restart"}))
    view = page.open(f"{live_run.url}/#/rollouts")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 1")
    fast_refresh(view)
    loop_thread.run(live_run.server.stop())
    view.wait_for_selector("#banner.offline", timeout=20_000)
    assert "cannot be reached" in view.locator("#banner").inner_text()
    assert "Offline" in view.locator("#connection-state").inner_text()
    assert view.locator("#rollout-rows tr").count() == 1  # what was shown stays
    loop_thread.run(live_run.store.enqueue_rollout({"task": "while the server was down"}))
    restarted = LightningStoreServer(live_run.store, port=live_run.server.port)
    loop_thread.run(restarted.start())
    live_run.server = restarted
    view.wait_for_selector("#connection-state.state-live", timeout=40_000)
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 2")
    assert view.locator("#banner").is_hidden()


def test_malformed_url_parameters_are_named_and_ignored(
    page: Page, live_run: ServedRun, loop_thread: LoopThread
) -> None:
    loop_thread.run(live_run.store.enqueue_rollout({"task": "queued"}))
    view = page.open(
        f"{live_run.url}/#/rollouts?status=bogus,queuing&page=-3&size=7&sort=evil&order=up&from=yesterday&mode=%ZZ"
    )
    view.wait_for_selector("#url-problems .notice")
    notice = view.locator("#url-problems").inner_text()
    for name in ("status=bogus", "page=-3", "size=7", "sort=evil", "order=up", "from=yesterday", "mode="):
        assert name in notice
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 1")
    assert view.get_by_label("queuing", exact=True).is_checked()


@pytest.mark.parametrize("route", ["#/nowhere/at/all", "#/rollouts/%E0%A4%A", "#/rollouts/ro-x?attempt=%%%&tab=<b>"])
def test_odd_routes_show_a_page_not_a_blank(page: Page, live_run: ServedRun, route: str) -> None:
    view = page.open(f"{live_run.url}/{route}")
    view.wait_for_selector("main h1")
    assert view.locator("main h1").inner_text() in ("Page not found", "Rollout not found")


def test_huge_attributes_are_folded_with_a_way_to_see_all(
    page: Page, live_run: ServedRun, loop_thread: LoopThread
) -> None:
    rollout = loop_thread.run(live_run.store.start_rollout({"task": "huge"}, worker_id="w"))
    huge = "0123456789" * 20_000
    span = Span.from_attributes(
        attributes={"output.value": huge},
        rollout_id=rollout.rollout_id,
        attempt_id=rollout.attempt.attempt_id,
        name="big answer",
        start_time=time.time(),
        end_time=time.time(),
    )
    loop_thread.run(add_spans(live_run.store, [span]))
    view = page.open(f"{live_run.url}/#/rollouts/{rollout.rollout_id}")
    view.locator(".wf-row", has_text="big answer").click()
    value = view.locator("#span-panel .folded")
    value.get_by_role("button", name="Show all 200,000 characters").wait_for()
    assert len(value.locator("pre").inner_text()) < 1000
    value.get_by_role("button", name="Show all 200,000 characters").click()
    assert value.locator("pre").inner_text() == huge
    fast_refresh(view)
    refreshes = int(view.evaluate("document.body.dataset.refreshes"))
    view.wait_for_function("n => Number(document.body.dataset.refreshes) > n", arg=refreshes, timeout=20_000)
    assert value.get_by_role("button", name="Show less").is_visible()  # a refresh keeps what was unfolded


def test_unknown_span_kinds_and_odd_values_are_shown_as_they_are(
    page: Page, live_run: ServedRun, loop_thread: LoopThread
) -> None:
    rollout = loop_thread.run(live_run.store.start_rollout({"task": "odd"}, worker_id="w"))
    now = time.time()
    odd = Span.from_attributes(
        attributes={"numbers": [1, 2, 3], "flag": True, "json": '{"three": null}', "ratio": 0.5, "empty": ""},
        rollout_id=rollout.rollout_id,
        attempt_id=rollout.attempt.attempt_id,
        name="vendor.custom.thing",
        parent_id="0123456789abcdef",  # its parent was never captured
        start_time=now,
        end_time=None,
        status=TraceStatus(status_code="ERROR", description="the vendor said no"),
    )
    loop_thread.run(add_spans(live_run.store, [odd]))
    view = page.open(f"{live_run.url}/#/rollouts/{rollout.rollout_id}")
    row = view.locator(".wf-row", has_text="vendor.custom.thing")
    assert row.get_attribute("data-kind") == "span"
    assert "orphan" in row.inner_text() and "error" in row.inner_text()
    row.click()
    panel = view.locator("#span-panel").inner_text()
    assert "the vendor said no" in panel
    assert '{"three": null}' in panel and "true" in panel and "0.5" in panel


def test_live_refresh_keeps_filters_and_scroll_position(
    page: Page, live_run: ServedRun, loop_thread: LoopThread
) -> None:
    store = live_run.store
    requests = [agl.types.EnqueueRolloutRequest(input={"task": f"task {index}"}, mode="train") for index in range(120)]
    loop_thread.run(store.enqueue_many_rollouts(requests))
    view = page.open(f"{live_run.url}/#/rollouts?status=queuing&size=100")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length === 100")
    fast_refresh(view)
    view.evaluate("window.scrollTo(0, 900)")
    scrolled = view.evaluate("window.scrollY")
    assert scrolled > 500
    hash_before = view.evaluate("location.hash")
    loop_thread.run(store.enqueue_many_rollouts(requests[:5]))
    finished = loop_thread.run(store.dequeue_rollout(worker_id="w"))
    assert finished is not None
    loop_thread.run(store.update_attempt(finished.rollout_id, finished.attempt.attempt_id, status="succeeded"))
    view.wait_for_function(
        "() => document.querySelector('#rollout-summary').textContent.startsWith('124 rollouts')", timeout=20_000
    )
    assert view.evaluate("location.hash") == hash_before
    assert view.evaluate("window.scrollY") == scrolled
    assert view.get_by_label("queuing", exact=True).is_checked()


def test_a_running_rollout_gains_spans_without_reloading_the_old_ones(
    page: Page, live_run: ServedRun, loop_thread: LoopThread
) -> None:
    rollout = loop_thread.run(live_run.store.start_rollout({"task": "streaming"}, worker_id="w"))
    attempt = rollout.attempt.attempt_id

    def span(name: str) -> Span:
        return Span.from_attributes(
            attributes={},
            rollout_id=rollout.rollout_id,
            attempt_id=attempt,
            name=name,
            start_time=time.time(),
            end_time=time.time(),
        )

    loop_thread.run(add_spans(live_run.store, [span("step 1"), span("step 2")]))
    view = page.open(f"{live_run.url}/#/rollouts/{rollout.rollout_id}")
    view.wait_for_function("() => document.querySelectorAll('.wf-row').length === 2")
    fast_refresh(view)
    loop_thread.run(add_spans(live_run.store, [span("step 3")]))
    view.wait_for_function("() => document.querySelectorAll('.wf-row').length === 3", timeout=20_000)
    span_queries = [
        request.url for request in page.requests if "/v1/agl/spans?" in request.url and "name=" not in request.url
    ]
    assert any("offset=2" in url for url in span_queries)  # only the new span was read
