"""Zero-code capture: turn an unchanged agent's LLM calls and framework steps into OpenTelemetry spans.

`instrument_all()` instruments every supported library that is installed in this process:

| integration | framework module | instrumentor package (extra) |
|---|---|---|
| `openai` | `openai` | openinference-instrumentation-openai (`openai`) + token-id recorder |
| `langchain` | `langchain_core` | openinference-instrumentation-langchain (`langchain`) |
| `openai_agents` | `agents` | openinference-instrumentation-openai-agents (`openai-agents`) |
| `autogen` | `autogen_agentchat` | openinference-instrumentation-autogen-agentchat (`autogen`) |
| `crewai` | `crewai` | openinference-instrumentation-crewai (`crewai`) |
| `pydantic_ai` | `pydantic_ai` | Pydantic AI's own GenAI-conventions tracing, switched on (`pydantic-ai`) |

Without arguments, frameworks that are not installed are skipped quietly, and an installed framework that cannot be
instrumented (its instrumentor package is missing, or does not support the installed framework version and would
refuse to attach) is logged as an error and warned about, naming the extra to install: the other frameworks are
still instrumented. Integrations named explicitly (`instrument_all(["crewai"])`, `OtelTracer(instrument=["crewai"])`)
must attach: any of them that cannot raises `InstrumentationError`. Nothing heavy is imported until `instrument_all`
runs.

`LazyInstrumentation` (what `OtelTracer(instrument="auto")`, the Trainer's default tracer, uses) instruments the
installed frameworks when the agent first imports them (at once for those already imported), so a process pays the
instrumentors' import cost only for the frameworks its agent uses; a framework that cannot be instrumented is
logged and warned about as above.

Instrumentation is reference-counted per integration: every `instrument_all` that instrumented an integration must be
matched by an `uninstrument_all`, and the integration is only turned off by the last one. Several users in one process
(for example the tracers of several shm runners) can thus come and go without turning capture off for the others.
`uninstrument_all(force=True)` turns the integrations off whatever the count.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import warnings
from collections.abc import Iterable
from typing import Optional

__all__ = [
    "INTEGRATIONS",
    "InstrumentationError",
    "LazyInstrumentation",
    "install_hint",
    "instrument_all",
    "instrumentation_count",
    "uninstrument_all",
]

from ._openinference import install_hint

logger = logging.getLogger(__name__)

INTEGRATIONS: dict[str, tuple[str, str]] = {
    "openai": ("openai", "agentlightning.instrumentation.openai"),
    "langchain": ("langchain_core", "agentlightning.instrumentation.langchain"),
    "openai_agents": ("agents", "agentlightning.instrumentation.openai_agents"),
    "autogen": ("autogen_agentchat", "agentlightning.instrumentation.autogen"),
    "crewai": ("crewai", "agentlightning.instrumentation.crewai"),
    "pydantic_ai": ("pydantic_ai", "agentlightning.instrumentation.pydantic_ai"),
}
"""integration name -> (framework module, Agent Lightning module with instrument_<name>/uninstrument_<name>)."""

_lock = threading.RLock()
_counts: dict[str, int] = {}  # integration name -> instrument_all calls that instrumented it and are not undone yet


def instrumentation_count(name: str) -> int:
    """How many `instrument_all` calls currently hold integration `name` instrumented."""
    with _lock:
        return _counts.get(name, 0)


def _select(integrations: Optional[Iterable[str]]) -> list[str]:
    names = list(INTEGRATIONS) if integrations is None else list(integrations)
    unknown = [name for name in names if name not in INTEGRATIONS]
    if unknown:
        raise ValueError(f"Unknown integrations {unknown}; known: {sorted(INTEGRATIONS)}")
    return names


class InstrumentationError(ImportError):
    """An integration that was asked for by name cannot be instrumented (the message says why and what to install)."""


def instrument_all(integrations: Optional[Iterable[str]] = None) -> dict[str, bool]:
    """Instrument the installed frameworks (all known ones), or exactly the named `integrations`.

    Returns integration name -> True when it is now instrumented. Each integration instrumented here counts one
    reference, released by `uninstrument_all`.

    Raises:
        InstrumentationError: an integration named in `integrations` cannot attach (framework or instrumentor not
            installed, or versions the instrumentor does not support).
        ValueError: an unknown integration name.
    """
    names = _select(integrations)
    with _lock:
        result: dict[str, bool] = {}
        try:
            _instrument(names, integrations is not None, result)
        except BaseException:
            # Nothing half-done stays behind: release what this call took, and turn off what nobody holds.
            _uninstrument([name for name in names if name in result or _counts.get(name, 0) == 0], False, result)
            raise
        return result


def _instrument(names: list[str], explicit: bool, result: dict[str, bool]) -> None:
    from ._openinference import framework_installed

    for name in names:
        framework, module_path = INTEGRATIONS[name]
        if not framework_installed(framework):
            if explicit:
                raise InstrumentationError(
                    f"Cannot instrument {name}: {framework} is not installed ({install_hint(_extra(name))})"
                )
            logger.debug("%s is not installed; not instrumenting it", framework)
            result[name] = False
            continue
        module = importlib.import_module(module_path)
        try:
            result[name] = bool(getattr(module, f"instrument_{name}")())
        except ImportError as exc:
            if explicit:
                raise InstrumentationError(f"Cannot instrument {name}: {exc}") from exc
            message = f"{framework} is installed but cannot be instrumented, so it runs uncaptured: {exc}"
            logger.error(message)
            warnings.warn(message, stacklevel=3)
            result[name] = False
        if result[name]:
            _counts[name] = _counts.get(name, 0) + 1


def _extra(name: str) -> str:
    return name.replace("_", "-")


def uninstrument_all(integrations: Optional[Iterable[str]] = None, *, force: bool = False) -> None:
    """Undo one `instrument_all` (integrations that were not instrumented are left alone).

    An integration that other `instrument_all` calls still hold stays instrumented (its count drops by one);
    the last release, a call for an integration no `instrument_all` holds, or `force=True` turns it off.
    """
    names = _select(integrations)
    with _lock:
        _uninstrument(names, force)


def _uninstrument(names: list[str], force: bool, taken: Optional[dict[str, bool]] = None) -> None:
    from ._openinference import framework_installed

    for name in reversed(names):
        if taken is not None and name in taken and not taken[name]:
            continue  # this call skipped it: another user's instrumentation, if any, is not ours to undo
        held = _counts.get(name, 0)
        if held > 1 and not force:
            _counts[name] = held - 1
            logger.debug("%s stays instrumented for %d other users", name, held - 1)
            continue
        _counts.pop(name, None)
        framework, module_path = INTEGRATIONS[name]
        if not framework_installed(framework):
            continue
        module = importlib.import_module(module_path)
        try:
            getattr(module, f"uninstrument_{name}")()
        except ImportError as exc:
            logger.debug("Could not uninstrument %s: %s", name, exc)


class LazyInstrumentation:
    """Instrument every installed framework when it is first imported (at once when it already is), until `stop`.

    Each integration it instrumented holds one reference (see `instrument_all`), released by `stop`. Without
    `wrapt` (which every OpenInference instrumentor depends on) the installed frameworks are instrumented at once.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._active = False

    @property
    def instrumented(self) -> list[str]:
        """The integrations this object instrumented so far."""
        with _lock:
            return sorted(self._taken)

    def start(self) -> None:
        from ._openinference import framework_installed

        try:
            from wrapt import register_post_import_hook  # pyright: ignore[reportMissingImports]
        except ImportError:
            register_post_import_hook = None
        with _lock:
            self._active = True
        for name, (framework, _) in INTEGRATIONS.items():
            if not framework_installed(framework):
                continue
            if register_post_import_hook is None or framework in sys.modules:
                self._take(name)
            else:
                register_post_import_hook(lambda _module, name=name: self._take(name), framework)

    def _take(self, name: str) -> None:
        with _lock:
            if not self._active or name in self._taken:
                return
            result: dict[str, bool] = {}
            _instrument([name], False, result)
            if result.get(name):
                self._taken.add(name)

    def stop(self) -> None:
        """Release what was instrumented; hooks of frameworks not imported yet do nothing from now on."""
        with _lock:
            self._active = False
            taken, self._taken = sorted(self._taken), set()
            if taken:
                _uninstrument(taken, False)
