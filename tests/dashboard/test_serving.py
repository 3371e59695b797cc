"""How the dashboard is served: by every store server at `/`, offline (no CDN), as package data, and safe to ship
(no markup built from strings anywhere in its code)."""

from __future__ import annotations

import glob
import re
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agentlightning.dashboard.assets import ASSET_PREFIX, STATIC_DIR, load_assets
from agentlightning.store import InMemoryLightningStore
from agentlightning.store.http.server.app import ServerSettings, create_app

ROOT = Path(__file__).resolve().parents[2]
JS_FILES = sorted(STATIC_DIR.rglob("*.js"))

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(InMemoryLightningStore()))


def test_the_store_server_serves_the_page_at_the_root(client: TestClient) -> None:
    answer = client.get("/")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="dashboard/js/main.js">' in answer.text
    assert '<meta name="agl-auth" content="none">' in answer.text
    assert "script-src 'self'" in answer.headers["content-security-policy"]


def test_files_are_served_with_their_type_and_revalidated_by_etag(client: TestClient) -> None:
    answer = client.get("/dashboard/js/main.js")
    assert answer.headers["content-type"].startswith("text/javascript")
    assert answer.headers["cache-control"] == "no-cache"
    again = client.get("/dashboard/js/main.js", headers={"If-None-Match": answer.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    head = client.head("/dashboard/css/dashboard.css")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 1000


def test_only_shipped_files_are_reachable(client: TestClient) -> None:
    for path in ("/dashboard/../pyproject.toml", "/dashboard/%2e%2e/assets.py", "/dashboard/assets.py", "/dashboard/"):
        assert client.get(path).status_code == 404


def test_the_dashboard_can_be_turned_off() -> None:
    client = TestClient(create_app(InMemoryLightningStore(), ServerSettings(dashboard=False)))
    assert client.get("/").status_code == 404


def test_every_module_import_resolves_to_a_shipped_file() -> None:
    served = set(load_assets("none"))
    for path in JS_FILES:
        for target in re.findall(r'^import .* from "(\.[^"]+)";$', path.read_text(), flags=re.MULTILINE):
            resolved = (path.parent / target).resolve().relative_to(STATIC_DIR.resolve()).as_posix()
            assert ASSET_PREFIX + resolved in served, f"{path.name} imports {target}, which is not served"
    index = (STATIC_DIR / "index.html").read_text()
    for reference in re.findall(r'(?:src|href)="([^"#]+)"', index):
        assert "/" + reference in served


def test_no_markup_is_ever_built_from_strings() -> None:
    forbidden = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|srcdoc")
    offenders = [
        f"{path.name}: {match.group(0)}" for path in JS_FILES for match in forbidden.finditer(path.read_text())
    ]
    assert offenders == []


def test_nothing_is_loaded_from_other_hosts() -> None:
    external = re.compile(r"""(?:https?:)?//(?!www\.w3\.org/2000/svg)[a-z0-9.-]+\.[a-z]{2,}""", re.IGNORECASE)
    for path in STATIC_DIR.rglob("*"):
        if path.is_file():
            assert not external.search(path.read_text()), f"{path} refers to another host"


def test_every_static_file_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["agentlightning.dashboard"]
    package = STATIC_DIR.parent
    included = {match for pattern in patterns for match in glob.glob(pattern, root_dir=package, recursive=True)}
    for path in STATIC_DIR.rglob("*"):
        if path.is_file():
            assert path.relative_to(package).as_posix() in included, path  # setuptools expands the same globs


def test_an_index_without_its_auth_marker_is_refused(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<html></html>")
    with pytest.raises(RuntimeError, match="agl-auth"):
        load_assets("none", tmp_path)
