"""The dashboard's static files: which ones exist, the URL each is served at, and the headers that go with them.

Pure functions over the files shipped in `static/` (package data); `routes.py` turns them into HTTP responses.
Everything is read once into memory: the whole dashboard is a few hundred kilobytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "ASSET_PREFIX",
    "CONTENT_SECURITY_POLICY",
    "STATIC_DIR",
    "Asset",
    "AuthHint",
    "load_assets",
    "security_headers",
]

STATIC_DIR = Path(__file__).with_name("static")
ASSET_PREFIX = "/dashboard/"
"""URL prefix of every file except the page itself, which is served at `/`."""

AuthHint = Literal["required", "none", "probe"]
"""What the page is told about authentication: the server requires an API key, does not, or cannot tell (a proxy
to a remote store server); with "probe" the page finds out from the first answer."""

_CONTENT_TYPES: Mapping[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""Only the dashboard's own files run, and the page talks only to the server it came from: even a value that
slipped into the DOM as markup could neither run a script nor send data elsewhere."""

_AUTH_PLACEHOLDER = b'<meta name="agl-auth" content="probe">'
_MAIN_SCRIPT = b'<script type="module" src="dashboard/js/main.js"></script>'


@dataclass(frozen=True)
class Asset:
    """One file as served: its bytes, media type and entity tag."""

    body: bytes
    content_type: str
    etag: str


def _asset(body: bytes, suffix: str) -> Asset:
    digest = hashlib.sha256(body).hexdigest()[:20]
    return Asset(body=body, content_type=_CONTENT_TYPES[suffix], etag=f'"{digest}"')


def load_assets(auth: AuthHint, root: Path = STATIC_DIR) -> dict[str, Asset]:
    """URL path -> Asset for every servable file under `root`; `index.html` is served at `/`.

    Files with unknown extensions (editor backups, licences named without a suffix) are not served.
    """
    assets: dict[str, Asset] = {}
    modules = sorted(path.relative_to(root).as_posix() for path in root.rglob("*.js"))
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in _CONTENT_TYPES:
            continue
        relative = path.relative_to(root).as_posix()
        body = path.read_bytes()
        if relative == "index.html":
            if _AUTH_PLACEHOLDER not in body:
                raise RuntimeError(f"{path} lacks the {_AUTH_PLACEHOLDER.decode()} element")
            body = body.replace(_AUTH_PLACEHOLDER, f'<meta name="agl-auth" content="{auth}">'.encode())
            # Every module is announced up front, so the browser fetches them in parallel instead of discovering
            # the import graph one level at a time.
            preloads = "".join(f'<link rel="modulepreload" href="dashboard/{module}">' for module in modules)
            body = body.replace(_MAIN_SCRIPT, preloads.encode() + _MAIN_SCRIPT)
            assets["/"] = _asset(body, path.suffix)
        else:
            assets[ASSET_PREFIX + relative] = _asset(body, path.suffix)
    if "/" not in assets:
        raise RuntimeError(f"The dashboard's index.html is missing from {root}; reinstall agentlightning")
    return assets


def security_headers(asset: Asset) -> dict[str, str]:
    """Headers of a dashboard response: type, validation (ETag, always revalidated) and the security policy."""
    return {
        "content-type": asset.content_type,
        "etag": asset.etag,
        "cache-control": "no-cache",
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "x-frame-options": "DENY",
    }
