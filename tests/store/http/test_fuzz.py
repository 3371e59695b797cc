"""Fuzzing every route from our OpenAPI document: valid and invalid inputs alike never cause a 500.

Bounded by a few generated examples per route in the normal suite (AGL_FUZZ_EXAMPLES raises it for a longer run).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from agentlightning.store import InMemoryLightningStore
from agentlightning.store.client_server import LightningStoreServer
from agentlightning.store.http.openapi import build_openapi

from .conftest import start_server, stop_server

EXAMPLES = int(os.environ.get("AGL_FUZZ_EXAMPLES", "5"))
API_KEY = "fuzz-key"

schema = schemathesis.openapi.from_dict(build_openapi())
schema.config.generation.update(
    modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE], max_examples=EXAMPLES
)


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[LightningStoreServer]:
    server = start_server(InMemoryLightningStore(), api_key=API_KEY)
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def seeded(fuzz_server: LightningStoreServer) -> LightningStoreServer:
    """Some real rollouts, attempts, spans and resources, so that generated ids sometimes exist."""
    import asyncio

    from ..helpers import make_span

    async def seed() -> None:
        for i in range(3):
            started = await fuzz_server.start_rollout(i)
            await fuzz_server.add_span(make_span(started.rollout_id, started.attempt.attempt_id, 1))
        await fuzz_server.enqueue_rollout("queued")

    asyncio.run(seed())
    return fuzz_server


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_route_answers_500(case: schemathesis.Case, seeded: LightningStoreServer) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    response = case.call(base_url=seeded.endpoint, headers=headers, timeout=30)
    assert response.status_code < 500 or response.status_code == 501, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    )
    content_type = response.headers.get("content-type") or [""]
    assert content_type[0].startswith(("application/json", "application/x-protobuf", "text/plain")), content_type
