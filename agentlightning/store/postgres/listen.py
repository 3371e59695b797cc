"""Cross-process wake-ups for `PostgresLightningStore` through PostgreSQL's LISTEN/NOTIFY.

Every write transaction that finishes rollouts or sets an earlier health deadline sends a NOTIFY on the store's
channel (its schema name) before it commits, so the notification is delivered exactly when the change becomes
visible, and never for a rolled-back change. Each store object keeps one dedicated connection that LISTENs on the
channel, in a task on the process's I/O loop (`agentlightning.utils.io_loop`; the store itself may be used from any
thread and loop).

While that connection is up, waiters sleep until notified; while it is down, the store falls back to polling and the
listener reconnects (logging the loss and the recovery). Every (re)connection is reported through `on_reset`:
whatever was committed while nobody listened must be re-read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import math
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Optional

import psycopg
from psycopg import AsyncConnection, sql

from agentlightning.utils.io_loop import io_loop

logger = logging.getLogger(__name__)

#: PostgreSQL refuses payloads of 8000 bytes or more; longer lists of ids become "re-read everything".
MAX_PAYLOAD_BYTES = 7900

Connector = Callable[[], Awaitable[AsyncConnection]]


def finished_payload(token: str, rollout_ids: Sequence[str]) -> str:
    """The notification of rollouts that finished (`"ids": null` when the list does not fit)."""
    payload = json.dumps({"from": token, "finished": list(rollout_ids)})
    if len(payload.encode()) > MAX_PAYLOAD_BYTES:
        payload = json.dumps({"from": token, "finished": None})
    return payload


def deadline_payload(token: str, deadline: float) -> str:
    """The notification of a health deadline earlier than the one the rollout had."""
    return json.dumps({"from": token, "deadline": deadline})


class PostgresListener:
    """LISTENs on `channel` in a task on the process's I/O loop and hands each notification from another store
    object to the callbacks (which must be thread-safe and quick).

    Args:
        connect: opens a new autocommit connection for listening.
        channel: the NOTIFY channel.
        token: this store object's id in payloads (its own notifications are ignored).
        on_finished: rollouts finished elsewhere (None: unknown which ones).
        on_deadline: a health deadline set elsewhere.
        on_reset: the connection went up (True) or down (False); changes may have been missed in between.
        retry_seconds: the first wait before reconnecting (doubles up to `max_retry_seconds`).
    """

    def __init__(
        self,
        connect: Connector,
        channel: str,
        *,
        on_finished: Callable[[Optional[list[str]]], None],
        on_deadline: Callable[[float], None],
        on_reset: Callable[[bool], None],
        retry_seconds: float = 0.05,
        max_retry_seconds: float = 2.0,
        location: str = "",
    ) -> None:
        self.token = uuid.uuid4().hex
        self.channel = channel
        self._connect = connect
        self._on_finished = on_finished
        self._on_deadline = on_deadline
        self._on_reset = on_reset
        self._retry_seconds = retry_seconds
        self._max_retry_seconds = max_retry_seconds
        self._location = location
        self._lock = threading.Lock()
        self._listening: Optional[concurrent.futures.Future[None]] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._task: Optional[asyncio.Task[None]] = None
        self._pid = os.getpid()
        self._stopped = False
        self._changed = threading.Condition()
        self.live = False
        """True while the LISTEN connection is up (notifications are being delivered)."""
        self.backend_pid: Optional[int] = None
        """The server process of the LISTEN connection while it is up."""
        self.connections = 0
        """How many times the LISTEN connection was (re)established."""

    def ensure_running(self) -> None:
        """Start listening unless it runs (also in a child process after fork())."""
        listening = self._listening
        if listening is not None and not listening.done() and self._pid == os.getpid():
            return
        with self._lock:
            if self._stopped:
                return
            if self._pid != os.getpid():  # a forked child: the parent's task and connection are not ours
                self._pid = os.getpid()
                self._listening = None
                self._loop = self._task = None
                self.live = False
            if self._listening is not None and not self._listening.done():
                return
            self._listening = io_loop().submit(self._run())

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        with self._lock:
            self._stopped = True
            listening, loop, task = self._listening, self._loop, self._task
        if listening is None or self._pid != os.getpid():
            return
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop already ended
                pass
        elif listening.cancel():  # it had not started
            return
        try:
            await asyncio.wait_for(asyncio.wrap_future(listening), 10.0)
        except asyncio.TimeoutError:
            pass

    def wait_live(self, timeout: float) -> bool:
        """Block until the LISTEN connection is up (True) or `timeout` seconds pass (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.live, timeout)

    def _set_live(self, live: bool) -> None:
        with self._changed:
            if live:
                self.connections += 1
            else:
                self.backend_pid = None
            self.live = live
            self._changed.notify_all()

    # -------------------------------------------------------------------------------------------- on the I/O loop
    async def _run(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()  # type: ignore[assignment]
        delay = self._retry_seconds
        lost_logged = False
        try:
            while not self._stopped:
                conn: Optional[AsyncConnection] = None
                try:
                    conn = await self._connect()
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self.backend_pid = conn.info.backend_pid
                    self._set_live(True)
                    if lost_logged:
                        logger.warning("PostgreSQL store %s: notification connection restored", self._location)
                        lost_logged = False
                    delay = self._retry_seconds
                    self._on_reset(True)
                    await self._receive(conn)
                except (psycopg.Error, OSError) as exc:
                    if self.live or not lost_logged:
                        logger.warning(
                            "PostgreSQL store %s: notification connection lost (%s); polling until it reconnects",
                            self._location,
                            (str(exc).strip().splitlines() or [type(exc).__name__])[0],
                        )
                        lost_logged = True
                finally:
                    was_live = self.live
                    self._set_live(False)
                    if conn is not None:
                        await _close_quietly(conn)
                    if was_live:
                        self._on_reset(False)
                if not self._stopped:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self._max_retry_seconds)
        except asyncio.CancelledError:
            pass

    async def _receive(self, conn: AsyncConnection) -> None:
        """Hand notifications to the callbacks until the connection fails; probe it when idle for a while."""
        while True:
            async for notice in conn.notifies(timeout=30.0):
                self._dispatch(notice.payload)
            await conn.execute("SELECT 1")  # idle: make sure the server is still there

    def _dispatch(self, payload: str) -> None:
        try:
            message = json.loads(payload)
            if message.get("from") == self.token:
                return
            if "finished" in message:
                finished = message["finished"]
                self._on_finished(None if finished is None else [str(item) for item in finished])
            elif "deadline" in message:
                deadline = float(message["deadline"])
                if not math.isnan(deadline):
                    self._on_deadline(deadline)
        except Exception:  # a foreign or garbled notification on our channel: re-read everything
            logger.debug("Unexpected notification on channel %s: %r", self.channel, payload[:200])
            self._on_finished(None)


async def _close_quietly(conn: AsyncConnection) -> None:
    try:
        await conn.close()
    except Exception:
        pass
