"""AgentOpsTracer: AgentOps decorators produce spans that reach the store, with no network access at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentlightning.tracer.agentops import AgentOpsTracer

ROOT = Path(__file__).resolve().parents[2]


def test_agentops_tracer_records_agentops_spans_without_contacting_any_server() -> None:
    pytest.importorskip("agentops", reason="the agentops extra is not installed")
    code = textwrap.dedent(
        """
        import asyncio, socket
        attempts = []
        original_connect = socket.socket.connect
        def guarded_connect(self, address):
            host = address[0] if isinstance(address, tuple) else str(address)
            if host not in ("127.0.0.1", "::1", "localhost"):
                attempts.append(address)
                raise OSError("network disabled in this test")
            return original_connect(self, address)
        socket.socket.connect = guarded_connect
        original_getaddrinfo = socket.getaddrinfo
        def guarded_getaddrinfo(host, *args, **kwargs):
            if host not in ("127.0.0.1", "::1", "localhost", None):
                attempts.append(host)
            return original_getaddrinfo(host, *args, **kwargs)
        socket.getaddrinfo = guarded_getaddrinfo

        import agentlightning as agl
        from agentlightning.store import InMemoryLightningStore
        from agentops.sdk.decorators import agent, operation

        @agent(name="planner")
        class Planner:
            @operation
            def plan(self, task):
                agl.emit_reward(1.0)
                return task

        async def main():
            store = InMemoryLightningStore()
            tracer = agl.AgentOpsTracer()
            tracer.init_worker(0, store)
            rollout = await store.start_rollout(input=None)
            async with tracer.trace_context(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id):
                Planner().plan("x")
            spans = await store.query_spans(rollout.rollout_id)
            tracer.teardown_worker(0)
            return sorted(span.name for span in spans), [s.attributes.get("agentops.span.kind") for s in spans]

        names, kinds = asyncio.run(main())
        import time; time.sleep(1.5)  # give any background exporter a chance to (wrongly) connect
        print(names, sorted(k for k in kinds if k), attempts)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == (
        "['agentlightning.reward', 'plan.task', 'planner.agent'] ['agent', 'task'] []"
    )


def test_agentops_tracer_without_the_package_fails_with_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agentops", None)
    tracer = AgentOpsTracer()
    with pytest.raises(ImportError, match=r"pip install 'agentlightning\[agentops\]'"):
        tracer.init_worker(0)
