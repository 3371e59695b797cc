"""`agl store`: serve a LightningStore over HTTP.

    agl store --backend memory:// --port 4747
    agl store --backend sqlite:///runs/store.db --host 0.0.0.0 --api-key "$KEY" --workers 4

The backend is any store URL (`agentlightning.store.store_from_url`). Several worker processes are allowed only for
backends shared across processes (SQLite, PostgreSQL); the in-memory store lives in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from typing import Any, Optional

from agentlightning.cli.options import port_number

__all__ = ["main"]

API_KEY_ENV = "AGL_STORE_API_KEY"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agl store", description="Serve a LightningStore over HTTP.")
    parser.add_argument("--backend", default="memory://", help="store URL (default: memory://)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=4747, help="TCP port (default: 4747)")
    parser.add_argument(
        "--api-key", default=None, help=f"bearer token required by every route (default: ${API_KEY_ENV})"
    )
    parser.add_argument("--workers", type=int, default=1, help="server processes (shared backends only)")
    parser.add_argument("--insecure", action="store_true", help="allow a non-loopback address without an API key")
    parser.add_argument("--max-body-bytes", type=int, default=None, help="largest accepted request body")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


def _fail(message: str, code: int = 2) -> int:
    print(f"agl store: {message}", file=sys.stderr)
    return code


def _run(coroutine: Any) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coroutine)
    else:
        uvloop.run(coroutine)


def main(argv: Optional[list[str]] = None) -> int:
    # A supervisor may stop the server at any moment, also while it is still starting: from here on SIGTERM is a
    # clean stop (KeyboardInterrupt, like Ctrl-C), never the default action that kills the process mid-start.
    previous = signal.signal(signal.SIGTERM, _interrupt) if _in_main_thread() else None
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(_STOPPED_EARLY, file=sys.stderr, flush=True)
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _main(argv: Optional[list[str]]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.workers < 1:
        return _fail("--workers must be at least 1")
    try:
        from agentlightning.store.client_server import LightningStoreServer
        from agentlightning.store.http.server.handlers import ServerLimits
        from agentlightning.store.http.server.heap import freeze_startup_heap
        from agentlightning.store.http.server.server import is_loopback
        from agentlightning.store.url import store_from_url
    except ImportError as exc:
        return _fail(f"the store server needs the server extra: pip install 'agentlightning[server]' ({exc})", 1)

    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None
    if not is_loopback(args.host) and not api_key and not args.insecure:
        return _fail(
            f"refusing to serve on {args.host} without an API key: pass --api-key (or set {API_KEY_ENV}), "
            "bind 127.0.0.1, or add --insecure on a trusted network"
        )
    try:
        store = store_from_url(args.backend)
    except ValueError as exc:
        return _fail(str(exc))
    except Exception as exc:  # a store that cannot open (missing directory, unreachable database, ...)
        return _fail(_one_line(exc), 1)
    max_body = args.max_body_bytes or ServerLimits.max_body_bytes
    if args.workers > 1:
        if not store.capabilities.get("zero_copy", False):
            return _fail(
                f"--workers {args.workers} needs a backend shared across processes (sqlite://, postgresql://); "
                f"{args.backend} keeps its data inside one process, so use --workers 1"
            )

        async def check_and_close() -> None:
            try:
                await _probe(store)
            finally:
                await store.close()

        try:
            _run(check_and_close())
        except _CannotServe as exc:
            return _fail(str(exc), 1)
        return _serve_workers(args, api_key, max_body)
    server = LightningStoreServer(
        store, host=args.host, port=args.port, api_key=api_key or "", insecure=args.insecure, max_body_bytes=max_body
    )

    async def start() -> None:
        await _probe(store)
        await server.start()  # returns once it accepts connections; a taken port raises here
        # This process only serves: full garbage collections may skip what start-up left (see heap.py).
        freeze_startup_heap()

    async def serve() -> None:
        # The handlers come first, and the start races them: a SIGTERM that arrives while the store opens or the
        # server starts (a supervisor stopping it early) ends the start and stops cleanly, as a later one does.
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, stopped.set)
            except (NotImplementedError, RuntimeError):  # not the main thread, or a platform without them
                pass
        starting = asyncio.ensure_future(start())
        stopping = asyncio.ensure_future(stopped.wait())
        try:
            await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                starting.cancel()
                await asyncio.gather(starting, return_exceptions=True)
                raise _StoppedEarly()
            starting.result()  # its error, if it failed
        except BaseException:  # also a Ctrl-C during the start
            stopping.cancel()
            await server.stop()  # nothing to stop if it did not start
            await store.close()
            raise
        print(f"LightningStore ({args.backend}) serving on {server.endpoint}", file=sys.stderr, flush=True)
        print(f"Dashboard: {server.endpoint}/", file=sys.stderr, flush=True)
        try:
            await stopping
        finally:
            await server.stop()
            await store.close()

    try:
        _run(serve())
    except _CannotServe as exc:
        return _fail(str(exc), 1)
    except RuntimeError as exc:
        return _fail(str(exc), 1)
    except _StoppedEarly:
        print(_STOPPED_EARLY, file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pass
    return 0


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 400 else text[:397] + "..."


class _CannotServe(Exception):
    """The store failed its first read: the server is not started."""


class _StoppedEarly(Exception):
    """SIGTERM or Ctrl-C arrived before the server was serving."""


_STOPPED_EARLY = "agl store: stopped before it started serving"


async def _probe(store: Any) -> None:
    """Open the store with one read, so that a bad database fails at start instead of answering every call with an
    error; raises _CannotServe with a one-line reason."""
    try:
        await asyncio.wait_for(store.get_latest_resources(), 30)
    except asyncio.TimeoutError:
        raise _CannotServe("cannot open the store: it did not answer within 30 s") from None
    except Exception as exc:
        raise _CannotServe(f"cannot open the store: {_one_line(exc)}") from None


def _serve_workers(args: argparse.Namespace, api_key: Optional[str], max_body: int) -> int:
    import uvicorn

    try:  # a friendly message for a taken port, before uvicorn forks its workers
        probe = socket.create_server((args.host, args.port))
        probe.close()
    except OSError as exc:
        return _fail(f"cannot bind {args.host}:{args.port}: {exc.strerror}. Another process may be using this port.", 1)
    os.environ["AGL_STORE_BACKEND"] = args.backend
    os.environ["AGL_STORE_MAX_BODY_BYTES"] = str(max_body)
    os.environ["AGL_STORE_BIND_HOST"] = args.host  # the workers check Host headers when keyless on loopback
    if api_key:
        os.environ[API_KEY_ENV] = api_key
    print(
        f"LightningStore ({args.backend}) serving on {args.host}:{args.port} with {args.workers} workers",
        file=sys.stderr,
    )
    print(f"Dashboard: http://{args.host}:{args.port}/", file=sys.stderr, flush=True)
    uvicorn.run(
        "agentlightning.store.http.server.app:create_app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=60,
        timeout_graceful_shutdown=5,
    )
    return 0
