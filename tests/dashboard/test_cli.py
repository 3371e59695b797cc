"""`agl dashboard --store URL` works for every kind of store, and `agl store` prints the dashboard's address."""

from __future__ import annotations

import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentlightning.cli.dashboard import main as dashboard_main
from agentlightning.store import InMemoryLightningStore, store_from_url

from ..store.postgres_support import drop_schema, fresh_schema_name, require_postgres
from .conftest import LoopThread, Page, serve
from .run_data import build_run


class Command:
    """`python -m agentlightning ...` in the background; `url` is the address it announced on stderr."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentlightning", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} in {self.output}") from None
            if line == "":
                raise AssertionError(f"exited ({self.process.wait()}) without {pattern!r}: {self.output}")
            self.output.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def commands() -> Iterator[list[Command]]:
    started: list[Command] = []
    yield started
    for command in started:
        command.stop()


def dashboard(commands: list[Command], store_url: str, *extra: str) -> str:
    command = Command("dashboard", "--store", store_url, "--port", "0", *extra)
    commands.append(command)
    return command.wait_for(r"Dashboard \(.*\): (http://\S+)/").group(1)


def fill(store_url: str, loop_thread: LoopThread) -> None:
    async def build() -> None:
        store = store_from_url(store_url)
        try:
            await build_run(store, extra_succeeded=2, pause=0)
        finally:
            await store.close()

    loop_thread.run(build())


def test_dashboard_of_a_sqlite_file_is_read_only(
    commands: list[Command], tmp_path: Path, loop_thread: LoopThread, page: Page
) -> None:
    store_url = f"sqlite:///{tmp_path / 'run.db'}"
    fill(store_url, loop_thread)
    url = dashboard(commands, store_url)
    rollouts = httpx.get(f"{url}/v1/agl/rollouts", params={"status_in": "succeeded"}).json()
    assert rollouts["total"] == 5
    refused = httpx.post(f"{url}/v1/agl/queues/rollouts/enqueue", json={"rollouts": [{"input": 1}]})
    assert refused.status_code == 405 and "read-only" in refused.json()["detail"]
    assert httpx.get(f"{url}/v1/agl/rollouts").json()["total"] == rollouts["total"] + 6
    view = page.open(f"{url}/#/")
    view.wait_for_selector("body[data-refreshes]")
    assert view.locator('#status-tiles a[data-status="succeeded"] .tile-count').inner_text() == "5"


@pytest.mark.postgres
def test_dashboard_of_a_postgres_schema(commands: list[Command], loop_thread: LoopThread) -> None:
    dsn = require_postgres()
    schema = fresh_schema_name()
    store_url = f"{dsn}?schema={schema}"
    try:
        fill(store_url, loop_thread)
        url = dashboard(commands, store_url)
        assert httpx.get(f"{url}/v1/agl/rollouts", params={"status_in": "failed"}).json()["total"] == 2
        assert "agl-auth" in httpx.get(f"{url}/").text
    finally:
        for command in commands:
            command.stop()
        drop_schema(schema)


def test_dashboard_of_a_store_server_relays_reads_with_the_callers_key(
    commands: list[Command], loop_thread: LoopThread, page: Page
) -> None:
    store = InMemoryLightningStore()
    served = serve(
        loop_thread, store, loop_thread.run(build_run(store, extra_succeeded=2, pause=0)), api_key="relay-key"
    )
    try:
        url = dashboard(commands, served.url)
        assert '<meta name="agl-auth" content="probe">' in httpx.get(f"{url}/").text
        assert httpx.get(f"{url}/v1/agl/workers").status_code == 401
        answer = httpx.get(f"{url}/v1/agl/workers", headers={"Authorization": "Bearer relay-key"})
        assert answer.status_code == 200 and answer.json()["total"] == 3
        rollout = httpx.get(
            f"{url}/v1/agl/rollouts/{served.data.failed}", headers={"Authorization": "Bearer relay-key"}
        )
        assert rollout.json()["status"] == "failed"
        assert httpx.post(f"{url}/v1/agl/rollouts/search", json={}).status_code == 405
        page.console.allow(r"status of 401")  # the relay cannot know in advance that the store needs a key
        page.console.allow(r"status of 502")  # the page may poll once more after the store server stops below
        view = page.open(f"{url}/#/runners")
        view.locator("#key-dialog").wait_for(state="visible")
        view.locator("#api-key-input").fill("relay-key")
        view.locator("#key-dialog").get_by_role("button", name="Use this key").click()
        view.wait_for_function("() => document.querySelectorAll('#runner-rows > tr').length === 3")
    finally:
        loop_thread.run(served.server.stop())
    down = httpx.get(f"{url}/v1/agl/health")
    assert down.status_code == 502 and down.json()["error_type"] == "StoreUnreachableError"


def run_main(args: list[str]) -> int:
    """`agl dashboard` in a thread of this process (the browser tests keep an event loop on the main thread)."""
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(dashboard_main(args)))
    thread.start()
    thread.join(60)
    return result[0]


def test_dashboard_rejects_an_unknown_store_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--store", "mongodb://x"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("agl dashboard: ") and "mongodb" in error


def test_dashboard_refuses_an_open_address_without_a_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGL_STORE_API_KEY", raising=False)
    assert run_main(["--store", "memory://", "--host", "0.0.0.0"]) == 2
    assert "--api-key" in capsys.readouterr().err


def test_dashboard_reports_a_taken_port(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert run_main(["--store", "memory://", "--port", str(taken.getsockname()[1])]) == 1
    assert "another process is using this port" in capsys.readouterr().err


def test_agl_store_prints_the_dashboard_address(commands: list[Command]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = Command("store", "--backend", "memory://", "--port", str(port))
    commands.append(command)
    url = command.wait_for(r"Dashboard: (http://\S+)/").group(1)
    assert url == f"http://127.0.0.1:{port}"
