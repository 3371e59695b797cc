"""`instrument_all`: an integration asked for by name must attach or raise; without names, an installed framework
that cannot be instrumented (e.g. a version its instrumentor does not support, which would silently refuse to attach)
is reported loudly and the others are still instrumented."""

from __future__ import annotations

import sys
import types
from collections.abc import Collection, Iterator
from typing import Any

import pytest
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from agentlightning import instrumentation
from agentlightning.instrumentation import InstrumentationError, instrument_all, uninstrument_all
from agentlightning.instrumentation._openinference import instrument_pair
from agentlightning.tracer.otel import OtelTracer

pytest.importorskip("openai", reason="the openai extra is not installed")

FAKE = "agl_test_fake_instrumentation"


class TooNewForUs(BaseInstrumentor):  # type: ignore[misc]
    """A real OpenTelemetry instrumentor whose framework requirement the installed packages do not meet."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ["pytest >= 999"]

    def _instrument(self, **kwargs: Any) -> None:
        raise AssertionError("must not attach with a dependency conflict")

    def _uninstrument(self, **kwargs: Any) -> None:
        pass


@pytest.fixture
def broken_integration(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An integration `brokenfw` whose framework (pytest) is installed but whose instrumentor cannot attach."""
    module = types.ModuleType(FAKE)
    module.TooNewForUs = TooNewForUs  # type: ignore[attr-defined]
    module.instrument_brokenfw, module.uninstrument_brokenfw = instrument_pair(f"{FAKE}.TooNewForUs", "brokenfw")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, FAKE, module)
    monkeypatch.setattr(instrumentation, "INTEGRATIONS", {**instrumentation.INTEGRATIONS, "brokenfw": ("pytest", FAKE)})
    yield "brokenfw"


def test_a_named_integration_that_cannot_attach_raises_with_the_reason(broken_integration: str) -> None:
    with pytest.raises(InstrumentationError, match=r"cannot attach: .*pytest >= 999.*agentlightning\[brokenfw\]"):
        instrument_all([broken_integration])


def test_a_named_integration_whose_framework_is_missing_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        instrumentation, "INTEGRATIONS", {**instrumentation.INTEGRATIONS, "ghost": ("no_such_framework_xyz", FAKE)}
    )
    with pytest.raises(InstrumentationError, match="no_such_framework_xyz is not installed"):
        instrument_all(["ghost"])


def test_without_names_a_broken_integration_is_reported_loudly_and_the_rest_attach(
    broken_integration: str, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        with pytest.warns(UserWarning, match="runs uncaptured"):
            result = instrument_all()
        assert result[broken_integration] is False
        assert result["openai"] is True
        assert any(
            record.levelname == "ERROR" and "cannot be instrumented" in record.getMessage() for record in caplog.records
        )
    finally:
        uninstrument_all()


def test_a_tracer_asked_for_a_broken_integration_fails_at_init_and_leaves_nothing_behind(
    broken_integration: str,
) -> None:
    import openai

    original = openai.OpenAI.request
    tracer = OtelTracer(instrument=["openai", broken_integration])
    with pytest.raises(InstrumentationError):
        tracer.init_worker(0)
    assert openai.OpenAI.request is original  # the integration that did attach was undone
    with pytest.raises(RuntimeError, match="init_worker"):
        _ = tracer.processor


def test_instrumentation_is_reference_counted_across_users() -> None:
    import openai

    from agentlightning.instrumentation import instrumentation_count

    original = openai.OpenAI.request
    assert instrumentation_count("openai") == 0
    instrument_all(["openai"])  # runner 1
    instrument_all(["openai"])  # runner 2
    assert instrumentation_count("openai") == 2
    uninstrument_all(["openai"])  # runner 1 tears down: runner 2 still captures
    assert openai.OpenAI.request is not original
    assert instrumentation_count("openai") == 1
    uninstrument_all(["openai"])  # the last user turns it off
    assert openai.OpenAI.request is original
    assert instrumentation_count("openai") == 0


def test_tearing_down_one_tracer_keeps_the_other_tracers_instrumentation() -> None:
    import openai

    original = openai.OpenAI.request
    first, second = OtelTracer(instrument=["openai"]), OtelTracer(instrument=["openai"])
    first.init_worker(0)
    second.init_worker(1)
    try:
        first.teardown_worker(0)
        assert openai.OpenAI.request is not original
    finally:
        second.teardown_worker(1)
    assert openai.OpenAI.request is original


def test_force_turns_instrumentation_off_whatever_the_count() -> None:
    import openai

    from agentlightning.instrumentation import instrumentation_count

    original = openai.OpenAI.request
    instrument_all(["openai"])
    instrument_all(["openai"])
    uninstrument_all(["openai"], force=True)
    assert openai.OpenAI.request is original
    assert instrumentation_count("openai") == 0


def test_a_failed_instrument_all_releases_what_it_took(broken_integration: str) -> None:
    import openai

    from agentlightning.instrumentation import instrumentation_count

    original = openai.OpenAI.request
    instrument_all(["openai"])  # another user holds openai
    try:
        with pytest.raises(InstrumentationError):
            instrument_all(["openai", broken_integration])
        assert instrumentation_count("openai") == 1
        assert openai.OpenAI.request is not original
    finally:
        uninstrument_all(["openai"])
    assert openai.OpenAI.request is original
