"""Shared plumbing for the OpenInference instrumentors Agent Lightning turns on."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable
from typing import Any, Optional

__all__ = [
    "InstrumentationUnavailableError",
    "activate",
    "deactivate",
    "framework_installed",
    "install_hint",
    "instrument_pair",
]

logger = logging.getLogger(__name__)


class InstrumentationUnavailableError(ImportError):
    """The framework is installed but the package that instruments it is not."""


def install_hint(extra: str) -> str:
    """The command that installs an extra of Agent Lightning (quoted, so that zsh does not expand the brackets)."""
    return f"pip install 'agentlightning[{extra}]'"


def framework_installed(module: str) -> bool:
    """True when `module` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _instrumentor(path: str, extra: str) -> Any:
    module_name, _, class_name = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InstrumentationUnavailableError(
            f"{module_name} is not installed; install it with `{install_hint(extra)}`"
        ) from exc
    return getattr(module, class_name)()


def _conflict(instrumentor: Any) -> Optional[str]:
    """Why the installed packages do not satisfy the instrumentor (None when they do)."""
    try:
        from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

        conflict = get_dependency_conflicts(list(instrumentor.instrumentation_dependencies()))
    except Exception:  # an instrumentor without the metadata: let instrument() decide
        return None
    return str(conflict) if conflict is not None else None


def activate(path: str, extra: str, **kwargs: Any) -> bool:
    """Instrument with the OpenInference instrumentor class at `path` (idempotent). Returns True once it is active.

    Raises:
        InstrumentationUnavailableError: the instrumentor is missing, its framework's installed version is one it
            does not support (it would silently refuse to attach), or it did not attach for another reason.
    """
    instrumentor = _instrumentor(path, extra)
    if instrumentor.is_instrumented_by_opentelemetry:
        return True
    conflict = _conflict(instrumentor)
    if conflict is not None:
        raise InstrumentationUnavailableError(
            f"{type(instrumentor).__name__} cannot attach: {conflict}. Install compatible versions with "
            f"`{install_hint(extra)}`"
        )
    instrumentor.instrument(**kwargs)
    if not instrumentor.is_instrumented_by_opentelemetry:
        raise InstrumentationUnavailableError(
            f"{type(instrumentor).__name__} did not attach (see the log above); reinstall with `{install_hint(extra)}`"
        )
    return True


def deactivate(path: str) -> None:
    """Undo `activate` (nothing happens when the instrumentor is not installed or not active)."""
    module_name, _, class_name = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return
    instrumentor = getattr(module, class_name)()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def instrument_pair(path: str, extra: str) -> tuple[Callable[[], bool], Callable[[], None]]:
    """`(instrument, uninstrument)` functions for the OpenInference instrumentor at `path` (pip extra `extra`)."""

    def instrument() -> bool:
        """Turn the instrumentor on (idempotent). Raises ImportError naming the extra when it is not installed."""
        return activate(path, extra)

    def uninstrument() -> None:
        """Turn the instrumentor off."""
        deactivate(path)

    return instrument, uninstrument
