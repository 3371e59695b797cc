"""How the tracer shares OpenTelemetry with the application: it installs a global SDK provider only when none is set,
otherwise adds itself to the existing one (or uses a private provider next to a non-SDK one). Each scenario runs in
a fresh interpreter because OpenTelemetry lets a process set the global provider only once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import asyncio, logging
from opentelemetry import trace
import agentlightning as agl
from agentlightning.store import InMemoryLightningStore

async def run_rollout(tracer):
    store = InMemoryLightningStore()
    tracer.init_worker(0, store)
    rollout = await store.start_rollout(input=None)
    async with tracer.trace_context(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id):
        with trace.get_tracer("app").start_as_current_span("app-span"):
            agl.emit_reward(1.0)
    names = [span.name for span in await store.query_spans(rollout.rollout_id)]
    tracer.teardown_worker(0)
    return names
"""


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_without_a_global_provider_the_tracer_installs_an_sdk_provider() -> None:
    out = run(
        """
        from opentelemetry.sdk.trace import TracerProvider
        names = asyncio.run(run_rollout(agl.OtelTracer()))
        print(isinstance(trace.get_tracer_provider(), TracerProvider), names)
        """
    )
    assert out == "True ['agentlightning.reward', 'app-span']"


def test_an_existing_sdk_provider_is_kept_and_its_exporters_still_see_the_spans() -> None:
    out = run(
        """
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        mine = TracerProvider()
        mine.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(mine)
        names = asyncio.run(run_rollout(agl.OtelTracer()))
        exported = sorted(span.name for span in exporter.get_finished_spans())
        print(trace.get_tracer_provider() is mine, names, exported)
        """
    )
    assert out == "True ['agentlightning.reward', 'app-span'] ['agentlightning.reward', 'app-span']"


def test_a_non_sdk_global_provider_gets_a_warning_and_our_own_spans_are_still_stored() -> None:
    out = run(
        """
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        trace.set_tracer_provider(trace.NoOpTracerProvider())
        names = asyncio.run(run_rollout(agl.OtelTracer()))
        print(names)
        """
    )
    assert out == "['agentlightning.reward']"


def test_repeated_tracers_do_not_pile_up_processors_in_the_provider() -> None:
    out = run(
        """
        from opentelemetry.sdk.trace import TracerProvider
        for _ in range(5):
            asyncio.run(run_rollout(agl.OtelTracer()))
        provider = trace.get_tracer_provider()
        print(len(provider._active_span_processor._span_processors))
        """
    )
    assert out == "1"
