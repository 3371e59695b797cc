"""A TCP proxy for failure tests: it forwards requests to the server and can drop the next responses.

A dropped response has been fully produced by the server (the write was applied) but the client's connection is
closed instead of receiving it: exactly a response lost on the network.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Optional


class DroppingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.drop_next = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def __enter__(self) -> DroppingProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop(self, count: int) -> None:
        with self._lock:
            self.drop_next = count

    def _take_drop(self) -> bool:
        with self._lock:
            if self.drop_next > 0:
                self.drop_next -= 1
                self.dropped += 1
                return True
            return False

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return

        async def upstream() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            while data := await up_reader.read(65536):
                if self._take_drop():
                    writer.transport.abort()
                    return
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except Exception:
            pass
        finally:
            for task in tasks:
                task.cancel()
            writer.transport.abort()
            up_writer.transport.abort()
