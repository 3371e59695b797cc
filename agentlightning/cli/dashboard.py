"""`agl dashboard`: watch a training run in the browser, against any store.

    agl dashboard --store sqlite:///runs/store.db          # opens the file read-only-by-API and serves the page
    agl dashboard --store http://10.0.0.5:4747 --open      # relays to a store server (the page asks for its key)

A store server (`agl store`) already serves the dashboard at its own address; this command is for a store that
no server serves yet, or a remote server whose port is not reachable from the browser's machine.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Optional

from agentlightning.cli.options import missing_sqlite_file, port_number

__all__ = ["main"]

API_KEY_ENV = "AGL_STORE_API_KEY"
DEFAULT_PORT = 4750


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agl dashboard", description="Serve the web dashboard of a LightningStore (read-only)."
    )
    parser.add_argument(
        "--store",
        required=True,
        help="store URL: memory://, sqlite:///path.db, postgresql://..., or http(s)://host:port of a store server",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"TCP port, 0 for any (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"key the page must send, for a store opened here (default: ${API_KEY_ENV}); a store server checks "
        "its own key",
    )
    parser.add_argument("--insecure", action="store_true", help="allow a non-loopback address without an API key")
    parser.add_argument("--open", action="store_true", help="open the dashboard in the default web browser")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser


def _fail(message: str, code: int = 2) -> int:
    print(f"agl dashboard: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        from agentlightning.dashboard.serve import dashboard_server_for, is_remote_store_url
        from agentlightning.store.http.server.server import is_loopback
    except ImportError as exc:
        return _fail(f"the dashboard needs the server extra: pip install 'agentlightning[server]' ({exc})", 1)

    remote = is_remote_store_url(args.store)
    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None
    if remote and args.api_key:
        return _fail(
            "--api-key applies to a store opened here; a store server checks its own key (enter it in the page)"
        )
    if not is_loopback(args.host) and not args.insecure and (remote or not api_key):
        need = "add --insecure on a trusted network" if remote else f"pass --api-key (or set {API_KEY_ENV})"
        return _fail(f"refusing to serve on {args.host}: anyone who can reach it could read the store; {need}")
    missing = missing_sqlite_file(args.store)
    if missing:  # opening it would create an empty database: a typo would show an empty run
        return _fail(f"no SQLite store at {missing} (from --store {args.store})", 1)
    if args.store.startswith("memory:"):
        print(
            "agl dashboard: memory:// opens a new, empty store; to watch a run, point --store at the store it uses",
            file=sys.stderr,
        )
    try:
        server = dashboard_server_for(args.store, api_key=None if remote else api_key)
    except (ValueError, ImportError) as exc:
        return _fail(str(exc))

    def ready(url: str) -> None:
        mode = "relaying reads to" if remote else "read-only view of"
        print(f"Dashboard ({mode} {args.store}): {url}", file=sys.stderr, flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(url)

    try:
        asyncio.run(server.serve(args.host, args.port, ready, log_level=args.log_level))
    except OSError as exc:
        return _fail(exc.strerror or str(exc), 1)
    except KeyboardInterrupt:
        pass
    return 0
