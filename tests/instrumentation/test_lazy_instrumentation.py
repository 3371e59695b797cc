"""Capture on by default without the import cost: `LazyInstrumentation` (the Trainer's default tracer, `OtelTracer(
instrument="auto")`) instruments an installed framework when the agent first imports it, and only then."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai", reason="the openai extra is not installed")
pytest.importorskip("openinference.instrumentation.openai", reason="the openai extra is not installed")

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_a_framework_is_instrumented_when_it_is_imported_and_released_on_stop() -> None:
    output = _run(
        """
        import sys
        from agentlightning.instrumentation import LazyInstrumentation, instrumentation_count

        lazy = LazyInstrumentation()
        lazy.start()
        before = ("openai" in sys.modules, instrumentation_count("openai"))
        import openai  # what an agent does inside its rollout
        after = instrumentation_count("openai")
        unused = "langchain_core" in sys.modules  # installed, but nothing imported it: never instrumented
        lazy.stop()
        print(before, after, unused, instrumentation_count("openai"))
        """
    )
    assert output == "(False, 0) 1 False 0"


def test_a_framework_already_imported_is_instrumented_at_once() -> None:
    output = _run(
        """
        import openai
        from agentlightning.instrumentation import LazyInstrumentation, instrumentation_count

        lazy = LazyInstrumentation()
        lazy.start()
        print(lazy.instrumented, instrumentation_count("openai"))
        lazy.stop()
        """
    )
    assert output == "['openai'] 1"


def test_the_trainers_default_tracer_captures_an_unchanged_openai_agent(tmp_path: Path) -> None:
    import agentlightning as agl
    from agentlightning.tracer.otel import OtelTracer

    from ..fake_openai_server import FakeOpenAIServer
    from .lazy_agents import plain_openai_agent

    with FakeOpenAIServer() as server:
        trainer = agl.Trainer(
            n_runners=1,
            strategy="cs",
            store=f"sqlite:///{tmp_path / 'run.db'}",
            progress="off",
            initial_resources={"llm": agl.LLM(endpoint=server.base_url, model="fake")},
        )
        assert isinstance(trainer.tracer, OtelTracer)
        trainer.dev(plain_openai_agent, [{"q": "hi"}])
    names = _span_names(tmp_path / "run.db")
    assert "openai.chat.completion" in names  # the client-side span of the call: capture was on


def _span_names(path: Path) -> list[str]:
    import asyncio

    from agentlightning import store_from_url

    async def read() -> list[Any]:
        store = store_from_url(f"sqlite:///{path}")
        try:
            (rollout,) = await store.query_rollouts()
            return [span.name for span in await store.query_spans(rollout.rollout_id)]
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_string_other_than_auto_is_refused_by_name() -> None:
    from agentlightning.tracer.otel import OtelTracer

    with pytest.raises(ValueError, match="'openai'"):
        OtelTracer(instrument="openai")  # type: ignore[arg-type]  # a list was meant: ["openai"]
