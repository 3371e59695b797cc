"""The store server process is assembled above the store: the store layer serves its API and /health, and what the
assembly package mounts (metrics, OTLP intake, the dashboard) arrives through the extension point the root fills."""

from __future__ import annotations

import subprocess
import sys

from starlette.testclient import TestClient

from agentlightning.server import STORE_SERVER_MOUNTS, mount_dashboard, mount_metrics, mount_otlp
from agentlightning.store import InMemoryLightningStore
from agentlightning.store.http.server.app import ServerSettings, create_app, installed_mounts


def test_store_servers_mount_the_assembly_package_by_default() -> None:
    assert installed_mounts() == STORE_SERVER_MOUNTS == (mount_metrics, mount_otlp, mount_dashboard)


def test_a_server_without_mounts_serves_the_store_api_and_health_only() -> None:
    client = TestClient(create_app(InMemoryLightningStore(), ServerSettings(mounts=())))
    assert client.get("/v1/agl/health").json() == {"status": "ok"}
    assert client.get("/v1/agl/statistics").status_code == 200
    assert client.get("/").status_code == 404
    assert client.get("/v1/agl/metrics").status_code == 404
    assert client.post("/v1/traces", content=b"{}", headers={"content-type": "application/json"}).status_code == 404


def test_the_default_server_serves_metrics_otlp_and_the_dashboard() -> None:
    client = TestClient(create_app(InMemoryLightningStore()))
    assert client.get("/").status_code == 200
    assert client.get("/v1/agl/metrics").status_code in (200, 501)  # 501: prometheus_client is not installed
    answer = client.post("/v1/traces", content=b"{}", headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    assert client.post("/v1/logs", content=b"").status_code == 501


def test_chosen_mounts_are_served_alone() -> None:
    client = TestClient(create_app(InMemoryLightningStore(), ServerSettings(mounts=(mount_otlp,))))
    assert client.post("/v1/traces", content=b"{}", headers={"content-type": "application/json"}).status_code == 200
    assert client.get("/").status_code == 404


def test_the_store_server_loads_the_higher_layers_only_when_it_builds_an_app() -> None:
    code = (
        "import sys\n"
        "import agentlightning.store.http.server.server\n"
        "print(sorted(m for m in ('agentlightning.server', 'agentlightning.dashboard', 'agentlightning.tracer') "
        "if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
