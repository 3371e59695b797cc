"""The dashboard is read-only, shows every value as text, and asks for an API key once, sending it only as a header."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentlightning.store import InMemoryLightningStore

from .conftest import LoopThread, Page, ServedRun, serve
from .run_data import XSS_IMG, XSS_SCRIPT, build_run

API_KEY = "dashboard-test-key-7f3a"


@pytest.fixture(scope="module")
def keyed_run(loop_thread: LoopThread) -> Iterator[ServedRun]:
    store = InMemoryLightningStore()
    data = loop_thread.run(build_run(store, extra_succeeded=2, pause=0))
    served = serve(loop_thread, store, data, api_key=API_KEY)
    try:
        yield served
    finally:
        loop_thread.run(served.server.stop())


def api_requests(page: Page) -> list[Any]:
    return [request for request in page.requests if "/v1/agl/" in request.url]


def assert_payload_is_inert(view: Any) -> None:
    assert view.evaluate("window.__agl_xss") is None
    assert view.evaluate("document.querySelectorAll('img').length") == 0
    assert view.evaluate("document.querySelectorAll('script').length") == 1  # the dashboard's own module


def test_script_and_img_payloads_in_inputs_and_spans_are_shown_as_text(page_without_csp: Page, run: ServedRun) -> None:
    page = page_without_csp  # the security policy is off: the rendering alone must keep the payloads inert
    hostile = run.extra["hostile"]
    view = page.open(f"{run.url}/#/rollouts")
    row = view.locator(f'#rollout-rows tr[data-key="{hostile}"]')
    row.wait_for()
    assert XSS_SCRIPT in row.locator(".col-input").inner_text()
    assert_payload_is_inert(view)

    view = page.open(f"{run.url}/#/rollouts/{hostile}")
    view.locator(".wf-row", has_text="tool <img").click()
    panel = view.locator("#span-panel")
    panel.get_by_text(XSS_IMG).first.wait_for()
    assert f"tool {XSS_IMG}" in panel.locator(".span-title").inner_text()
    assert XSS_SCRIPT in view.locator(".detail-info").inner_text()  # the input and the metadata
    assert_payload_is_inert(view)

    view = page.open(f"{run.url}/#/rollouts/{hostile}?tab=conversation")
    view.locator("#conversation-pane .llm-call").wait_for()
    assert f"{XSS_SCRIPT}{XSS_IMG}" in view.locator("#conversation-pane .msg.role-user").inner_text()
    assert_payload_is_inert(view)
    view.wait_for_timeout(300)  # an onerror handler would fire after the failed image load
    assert view.evaluate("window.__agl_xss") is None


def test_the_page_forbids_inline_scripts_and_foreign_connections(run: ServedRun) -> None:
    answer = httpx.get(f"{run.url}/")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy and "default-src 'none'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"


def test_markup_forced_into_the_page_still_cannot_run(page: Page, run: ServedRun) -> None:
    page.console.allow(r"Content Security Policy")
    page.console.allow(r"status of 404")  # the forced <img src=x> itself
    view = page.open(f"{run.url}/#/")
    view.wait_for_selector("body[data-refreshes]")
    view.evaluate(f"document.body.insertAdjacentHTML('beforeend', {XSS_IMG!r})")
    view.wait_for_timeout(300)
    assert view.evaluate("window.__agl_xss") is None
    assert any("Content Security Policy" in error for error in page.console.errors)  # the handler was refused


def test_the_dashboard_only_reads(page: Page, run: ServedRun) -> None:
    for route in ("#/", "#/rollouts?status=failed", f"#/rollouts/{run.data.retried}", "#/resources", "#/runners"):
        view = page.open(f"{run.url}/{route}")
        view.wait_for_selector("body[data-refreshes]")
        view.wait_for_load_state("networkidle")
    methods = {request.method for request in api_requests(page)}
    assert methods == {"GET"}


def test_api_key_is_asked_once_and_sent_only_as_a_header(page: Page, keyed_run: ServedRun) -> None:
    view = page.open(f"{keyed_run.url}/#/rollouts")
    dialog = view.locator("#key-dialog")
    dialog.wait_for(state="visible")
    assert api_requests(page) == []  # the page knows a key is needed before asking the server anything
    view.locator("#api-key-input").fill(API_KEY)
    dialog.get_by_role("button", name="Use this key").click()
    view.wait_for_selector("body[data-refreshes]")
    view.wait_for_function("() => document.querySelectorAll('#rollout-rows tr').length > 0")
    view.reload()  # entered once: the tab remembers it
    view.wait_for_selector("body[data-refreshes]")
    assert view.locator("#key-dialog").is_hidden()
    requests = api_requests(page)
    assert requests
    for request in requests:
        assert request.headers.get("authorization") == f"Bearer {API_KEY}"
        assert API_KEY not in request.url
    assert API_KEY not in view.evaluate("location.href")


def test_a_wrong_api_key_gets_a_clear_message_and_no_stream_of_retries(page: Page, keyed_run: ServedRun) -> None:
    page.console.allow(r"Failed to load resource: the server responded with a status of 401")
    view = page.open(f"{keyed_run.url}/#/")
    view.locator("#api-key-input").fill("not-the-key")
    view.locator("#key-dialog").get_by_role("button", name="Use this key").click()
    view.wait_for_selector("#banner.auth")
    assert "API key was rejected" in view.locator("#banner").inner_text()
    assert "rejected" in view.locator("#key-message").inner_text()
    failed = len(api_requests(page))
    assert 0 < failed <= 10  # one overview refresh, at most
    view.wait_for_timeout(2000)  # a retry loop would have sent more by now (the backoff starts at 1 s)
    assert len(api_requests(page)) == failed
    view.locator("#api-key-input").fill(API_KEY)
    view.locator("#key-dialog").get_by_role("button", name="Use this key").click()
    view.wait_for_selector("body[data-refreshes]")
    assert view.locator("#banner").is_hidden()


def test_assets_and_page_are_served_without_the_key_but_data_is_not(keyed_run: ServedRun) -> None:
    page = httpx.get(f"{keyed_run.url}/")
    assert page.status_code == 200 and '<meta name="agl-auth" content="required">' in page.text
    assert httpx.get(f"{keyed_run.url}/dashboard/js/main.js").status_code == 200
    assert httpx.get(f"{keyed_run.url}/v1/agl/rollouts").status_code == 401
    answer = httpx.get(f"{keyed_run.url}/v1/agl/rollouts", headers={"Authorization": f"Bearer {API_KEY}"})
    assert answer.status_code == 200
