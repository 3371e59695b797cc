"""Fixtures of the dashboard tests: a store server holding a realistic run, and pages of the system Chromium.

The browser is Debian's Chromium (`apt-get install chromium`) driven by Playwright for Python; no browser is ever
downloaded. Without it the browser tests skip and say how to enable them. Every page collects console errors and
uncaught exceptions, and a test fails if any appeared (`console.allow(...)` admits the browser's own network
messages in the tests that break the network on purpose).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, TypeVar

import pytest

from agentlightning.store import InMemoryLightningStore, LightningStore
from agentlightning.store.client_server import LightningStoreServer

from .run_data import RunData, add_hostile_rollout, add_wide_rollout, build_run

T = TypeVar("T")

CHROMIUM = os.environ.get("AGL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOW_TO_ENABLE = (
    "the dashboard browser tests need Debian's Chromium and Playwright for Python: "
    "`apt-get install -y chromium` and `pip install -e '.[test]'` (scripts/test.sh does both where it can)"
)
SCREENSHOTS = os.environ.get("AGL_DASHBOARD_SCREENSHOTS")
"""Folder the screenshot test writes the docs' images to (docs/images/dashboard to refresh them)."""


class LoopThread:
    """An event loop in a daemon thread, so sync browser tests can drive async store code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="dashboard-tests-loop", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="package")
def loop_thread() -> Iterator[LoopThread]:
    runner = LoopThread()
    try:
        yield runner
    finally:
        runner.close()


@dataclass
class ServedRun:
    """A store server on a free port serving `store`, filled with `data`."""

    store: LightningStore
    server: LightningStoreServer
    data: RunData
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.endpoint


def heartbeat(loop_thread: LoopThread, served: ServedRun) -> None:
    """Fresh heartbeats from the run's runners (the shared run may be older than the staleness limit)."""
    from .run_data import system_snapshot

    for index, worker in enumerate(served.data.workers):
        loop_thread.run(
            served.store.update_worker(worker, heartbeat_stats=system_snapshot(30.0 + 20 * index, 40.0 + 12 * index))
        )


def serve(loop_thread: LoopThread, store: LightningStore, data: RunData, **options: Any) -> ServedRun:
    server = LightningStoreServer(store, port=0, **options)
    loop_thread.run(server.start())
    return ServedRun(store=store, server=server, data=data)


@pytest.fixture(scope="package")
def run(loop_thread: LoopThread) -> Iterator[ServedRun]:
    """A store server with the realistic run, a hostile rollout and a 300-span rollout (shared: tests only read)."""
    store = InMemoryLightningStore()
    data = loop_thread.run(build_run(store))
    served = serve(loop_thread, store, data)
    served.extra["hostile"] = loop_thread.run(add_hostile_rollout(store))
    served.extra["wide"] = loop_thread.run(add_wide_rollout(store, 300))
    try:
        yield served
    finally:
        loop_thread.run(served.server.stop())


def _chromium_problem() -> Optional[str]:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed"
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and shutil.which(CHROMIUM) is None:
        return f"no Chromium at {CHROMIUM}"
    return None


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    problem = _chromium_problem()
    if problem is not None:
        pytest.skip(f"{problem}: {HOW_TO_ENABLE}")
    from playwright.sync_api import sync_playwright

    manager = sync_playwright().start()
    try:
        instance = manager.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    except Exception as exc:
        manager.stop()
        pytest.skip(f"Chromium at {CHROMIUM} did not start ({exc}): {HOW_TO_ENABLE}")
    try:
        yield instance
    finally:
        instance.close()
        manager.stop()


class ConsoleLog:
    """Console errors and uncaught exceptions of a page; `allow(pattern)` admits expected browser messages."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.allowed: list[re.Pattern[str]] = []

    def allow(self, pattern: str) -> None:
        self.allowed.append(re.compile(pattern))

    def record(self, text: str) -> None:
        self.errors.append(text)

    def unexpected(self) -> list[str]:
        return [error for error in self.errors if not any(pattern.search(error) for pattern in self.allowed)]


@dataclass
class Page:
    """A browser page plus what it logged and every request it sent."""

    page: Any
    console: ConsoleLog
    requests: list[Any]

    def open(self, url: str) -> Any:
        self.page.goto(url)
        return self.page


def open_page(browser: Any, **context_options: Any) -> Iterator[Page]:
    """A fresh browser context and page; after the caller is done, asserts that nothing was logged as an error."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, **context_options)
    page = context.new_page()
    console = ConsoleLog()
    requests: list[Any] = []
    page.on("console", lambda message: console.record(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: console.record(f"uncaught: {error}"))
    page.on("request", lambda request: requests.append(request))
    page.set_default_timeout(15_000)
    try:
        yield Page(page=page, console=console, requests=requests)
        assert console.unexpected() == [], f"console errors: {console.unexpected()}"
    finally:
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    yield from open_page(browser)


@pytest.fixture
def page_without_csp(browser: Any) -> Iterator[Page]:
    """A page that ignores the Content-Security-Policy, so a test can prove the rendering itself is safe."""
    yield from open_page(browser, bypass_csp=True)


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
