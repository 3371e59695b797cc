"""Extension points: a lower layer loads what a higher layer installed, by dotted path, on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentlightning.utils import extensions


def test_a_point_loads_the_attribute_or_module_installed_at_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extensions, "_installed", {})
    extensions.install("demo.attribute", "json:dumps")
    extensions.install("demo.module", "json")
    import json

    assert extensions.load("demo.attribute") is json.dumps
    assert extensions.load("demo.module") is json
    assert extensions.installed("demo.module") and not extensions.installed("demo.other")


def test_loading_an_empty_point_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extensions, "_installed", {})
    with pytest.raises(LookupError, match=r"'demo\.missing'"):
        extensions.load("demo.missing")


@pytest.mark.parametrize("target", ["", "a:b:c"])
def test_a_malformed_target_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="module:attribute"):
        extensions.install("demo.point", target)


def test_importing_any_module_of_the_package_fills_every_point_without_importing_the_fillers() -> None:
    code = (
        "import sys\n"
        "from agentlightning.utils import extensions as e\n"
        "print(e.installed(e.STORE_SERVER_MOUNTS), e.installed(e.TRACER_INSTRUMENTATION), "
        "'agentlightning.server' in sys.modules, 'agentlightning.instrumentation' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True", "False", "False"]


def test_tracers_reach_instrumentation_through_its_point() -> None:
    import agentlightning.instrumentation as instrumentation

    assert extensions.load(extensions.TRACER_INSTRUMENTATION) is instrumentation
