"""Zero-code capture: turn an unchanged agent's LLM calls and framework steps into OpenTelemetry spans.

`instrument_all()` instruments every supported library that is installed in this process:

| integration | framework module | instrumentor package (extra) |
|---|---|---|
| `openai` | `openai` | openinference-instrumentation-openai (`openai`) + token-id recorder |
| `langchain` | `langchain_core` | openinference-instrumentation-langchain (`langchain`) |
| `openai_agents` | `agents` | openinference-instrumentation-openai-agents (`openai-agents`) |
| `autogen` | `autogen_agentchat` | openinference-instrumentation-autogen-agentchat (`autogen`) |
| `crewai` | `crewai` | openinference-instrumentation-crewai (`crewai`) |

Without arguments, frameworks that are not installed are skipped quietly, and an installed framework that cannot be
instrumented (its instrumentor package is missing, or does not support the installed framework version and would
refuse to attach) is logged as an error and warned about, naming the extra to install: the other frameworks are
still instrumented. Integrations named explicitly (`instrument_all(["crewai"])`, `OtelTracer(instrument=["crewai"])`)
must attach: any of them that cannot raises `InstrumentationError`. Nothing heavy is imported until `instrument_all`
runs.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Iterable
from typing import Optional

__all__ = ["INTEGRATIONS", "InstrumentationError", "instrument_all", "uninstrument_all"]

logger = logging.getLogger(__name__)

INTEGRATIONS: dict[str, tuple[str, str]] = {
    "openai": ("openai", "agentlightning.instrumentation.openai"),
    "langchain": ("langchain_core", "agentlightning.instrumentation.langchain"),
    "openai_agents": ("agents", "agentlightning.instrumentation.openai_agents"),
    "autogen": ("autogen_agentchat", "agentlightning.instrumentation.autogen"),
    "crewai": ("crewai", "agentlightning.instrumentation.crewai"),
}
"""integration name -> (framework module, Agent Lightning module with instrument_<name>/uninstrument_<name>)."""


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

    Returns integration name -> True when it is now instrumented.

    Raises:
        InstrumentationError: an integration named in `integrations` cannot attach (framework or instrumentor not
            installed, or versions the instrumentor does not support).
        ValueError: an unknown integration name.
    """
    from ._openinference import framework_installed

    explicit = integrations is not None
    result: dict[str, bool] = {}
    for name in _select(integrations):
        framework, module_path = INTEGRATIONS[name]
        if not framework_installed(framework):
            if explicit:
                raise InstrumentationError(
                    f"Cannot instrument {name}: {framework} is not installed (pip install 'agentlightning[{_extra(name)}]')"
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
            warnings.warn(message, stacklevel=2)
            result[name] = False
    return result


def _extra(name: str) -> str:
    return name.replace("_", "-")


def uninstrument_all(integrations: Optional[Iterable[str]] = None) -> None:
    """Undo `instrument_all` (integrations that were not instrumented are left alone)."""
    from ._openinference import framework_installed

    for name in reversed(_select(integrations)):
        framework, module_path = INTEGRATIONS[name]
        if not framework_installed(framework):
            continue
        module = importlib.import_module(module_path)
        try:
            getattr(module, f"uninstrument_{name}")()
        except ImportError as exc:
            logger.debug("Could not uninstrument %s: %s", name, exc)
