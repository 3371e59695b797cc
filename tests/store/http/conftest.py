"""Fixtures for the HTTP server/client tests: a served in-memory store and a raw HTTP helper."""

from __future__ import annotations

import asyncio
import http.client
import json
import multiprocessing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from agentlightning.store import InMemoryLightningStore, LightningStore
from agentlightning.store.client_server import LightningStoreServer


def start_server(store: Optional[LightningStore] = None, **kwargs: Any) -> LightningStoreServer:
    """A server on a free loopback port, serving from its own thread (usable from sync and async tests)."""
    server = LightningStoreServer(store or InMemoryLightningStore(), host="127.0.0.1", port=0, **kwargs)
    asyncio.run(server.start())
    return server


async def start_server_async(store: Optional[LightningStore] = None, **kwargs: Any) -> LightningStoreServer:
    """`start_server` for async tests."""
    server = LightningStoreServer(store or InMemoryLightningStore(), host="127.0.0.1", port=0, **kwargs)
    await server.start()
    return server


def stop_server(server: LightningStoreServer) -> None:
    asyncio.run(server.stop())


@pytest.fixture
def server() -> Iterator[LightningStoreServer]:
    instance = start_server()
    try:
        yield instance
    finally:
        stop_server(instance)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def call(
    server: LightningStoreServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: Optional[bytes] = None,
    headers: Optional[dict[str, str]] = None,
) -> Answer:
    """One raw HTTP request to the server (path includes /v1/agl when needed)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        all_headers = {"Content-Type": "application/json"}
        all_headers.update(headers or {})
        connection.request(method, path, body=payload, headers=all_headers)
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


def enqueue_in_child(store: LightningStore, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """Run in a child process: enqueue one rollout through `store` and report its id (or the error)."""
    try:
        rollout = asyncio.run(store.enqueue_rollout("from child"))
        queue.put(rollout.rollout_id)
    except BaseException as exc:  # pragma: no cover - reported to the parent
        queue.put(repr(exc))
