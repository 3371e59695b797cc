"""A client given an API key for a server that checks none says so once, instead of silently sending it."""

from __future__ import annotations

import logging

import pytest

from agentlightning.store.client_server import LightningStoreClient

from .conftest import start_server_async

_WARNING = "requires no API key"


@pytest.mark.parametrize("transport", ["lite", "aiohttp"])
async def test_a_client_with_a_key_warns_once_that_a_keyless_server_does_not_check_it(
    transport: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGL_STORE_API_KEY", raising=False)
    if transport == "aiohttp":
        monkeypatch.setenv("_AGL_HTTP_CLIENT", "aiohttp")
    server = await start_server_async()
    client = LightningStoreClient(server.endpoint, api_key="meant-for-another-server")
    try:
        with caplog.at_level(logging.WARNING):
            await client.enqueue_rollout("x")
            await client.enqueue_rollout("y")
    finally:
        await client.close()
        await server.stop()
    warnings = [record.getMessage() for record in caplog.records if _WARNING in record.getMessage()]
    assert len(warnings) == 1 and server.endpoint in warnings[0] and "--api-key" in warnings[0]


async def test_a_client_with_the_servers_key_or_without_a_key_does_not_warn(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGL_STORE_API_KEY", raising=False)
    keyed = await start_server_async(api_key="s3cret")
    keyless = await start_server_async()
    clients = [LightningStoreClient(keyed.endpoint, api_key="s3cret"), LightningStoreClient(keyless.endpoint)]
    try:
        with caplog.at_level(logging.WARNING):
            for client in clients:
                await client.enqueue_rollout("x")
    finally:
        for client in clients:
            await client.close()
        await keyed.stop()
        await keyless.stop()
    assert not [record for record in caplog.records if _WARNING in record.getMessage()]
