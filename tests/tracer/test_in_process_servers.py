"""Servers running in the same process as an open trace context (the shm strategy's store server, the local
inference server, the LLM proxy) keep their own web-framework spans out of the rollout."""

from __future__ import annotations

import httpx

from agentlightning.store import InMemoryLightningStore
from agentlightning.store.http.client.client import LightningStoreClient
from agentlightning.store.http.server.server import LightningStoreServer
from agentlightning.tracer.otel import OtelTracer
from agentlightning.utils.uvicorn_thread import UvicornThread


async def test_an_in_process_store_server_leaves_no_spans_in_the_rollout() -> None:
    store = InMemoryLightningStore()
    server = LightningStoreServer(store, host="127.0.0.1", port=0)
    await server.start()
    client = LightningStoreClient(server.endpoint)
    tracer = OtelTracer(flush_interval=0.05)
    tracer.init_worker(0, store)
    try:
        attempted = await store.start_rollout(input=None)
        async with tracer.trace_context(rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id):
            # An agent (or a runner in the same process) talking to the store server while its trace is open.
            await client.query_rollouts()
            await client.get_latest_resources()
        # Before the fix, FastAPI's request spans ("POST", "GET") of the server landed here.
        assert [span.name for span in await store.query_spans(attempted.rollout_id)] == []
    finally:
        tracer.teardown_worker(0)
        await client.close()
        await server.stop()


async def test_apps_served_by_uvicorn_thread_leave_no_spans_in_the_rollout() -> None:
    from fastapi import FastAPI
    from opentelemetry import trace

    app = FastAPI()

    @app.get("/work")
    async def work() -> dict[str, bool]:
        with trace.get_tracer("server-side").start_as_current_span("server.work"):
            return {"ok": True}

    server = UvicornThread(app, name="test-server")  # not wrapped: the serving thread itself is detached
    server.start()
    store = InMemoryLightningStore()
    tracer = OtelTracer(flush_interval=0.05)
    tracer.init_worker(0, store)
    try:
        attempted = await store.start_rollout(input=None)
        async with tracer.trace_context(rollout_id=attempted.rollout_id, attempt_id=attempted.attempt.attempt_id):
            with trace.get_tracer("agent").start_as_current_span("agent.step"):
                async with httpx.AsyncClient() as http:
                    assert (await http.get(f"http://127.0.0.1:{server.port}/work")).json() == {"ok": True}
        assert [span.name for span in await store.query_spans(attempted.rollout_id)] == ["agent.step"]
    finally:
        tracer.teardown_worker(0)
        server.stop()
