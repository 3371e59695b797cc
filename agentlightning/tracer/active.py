"""The active tracer: the tracer emitters send their spans to.

A tracer becomes active when one of its trace contexts opens and stops being active when its last open context
closes. Activation is tracked per execution context (thread or asyncio task, through a context variable), so several
runners in one process — each with its own tracer, in its own thread — can trace concurrently: an emitter reaches the
tracer whose context is open where it runs. Opening a context of a *different* tracer inside an open one (in the same
thread or task) is an error, because emitted spans would reach only one of them.

Code that runs outside every trace context (for example a thread started by the agent without copying the context
variables) falls back to the process-wide view: the tracer set with `set_active_tracer`, or the only tracer with open
contexts in the process. With several tracers open at once there is no unambiguous answer and None is returned.
"""

from __future__ import annotations

import contextvars
import threading
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .base import Tracer

__all__ = ["clear_active_tracer", "get_active_tracer", "set_active_tracer"]

_lock = threading.Lock()
_explicit: Optional[Tracer] = None
_open: dict[int, tuple[Tracer, int]] = {}
"""Tracers with open trace contexts anywhere in the process: id -> (tracer, number of open contexts)."""

_current: contextvars.ContextVar[Optional[tuple[Tracer, int]]] = contextvars.ContextVar(
    "agentlightning_active_tracer", default=None
)
"""The tracer whose context is open in this thread/task, with the nesting depth."""


def _already_active(active: Tracer, tracer: Tracer) -> RuntimeError:
    return RuntimeError(f"Tracer {active!r} is already active; close its trace context before activating {tracer!r}")


def set_active_tracer(tracer: Tracer) -> None:
    """Make `tracer` the process-wide active tracer (outside trace contexts too).

    Raises:
        RuntimeError: another tracer is already active.
    """
    global _explicit
    current = _current.get()
    if current is not None and current[0] is not tracer:
        raise _already_active(current[0], tracer)
    with _lock:
        if _explicit is not None and _explicit is not tracer:
            raise _already_active(_explicit, tracer)
        others = [entry[0] for key, entry in _open.items() if key != id(tracer)]
        if others:
            raise _already_active(others[0], tracer)
        _explicit = tracer


def get_active_tracer() -> Optional[Tracer]:
    """The tracer whose trace context is open here; outside contexts the process-wide one (see module docstring)."""
    current = _current.get()
    if current is not None:
        return current[0]
    if _explicit is not None:
        return _explicit
    opened = list(_open.values())
    if len(opened) == 1:
        return opened[0][0]
    return None


def clear_active_tracer() -> None:
    """Forget every active tracer (whatever contexts are still open)."""
    global _explicit
    with _lock:
        _explicit = None
        _open.clear()
    _current.set(None)


def enter_active_tracer(tracer: Tracer) -> None:
    """Activate `tracer` for one more open trace context in the calling thread/task (used by tracers).

    Raises:
        RuntimeError: a context of another tracer is open here, or another tracer was set process-wide.
    """
    current = _current.get()
    if current is not None and current[0] is not tracer:
        raise _already_active(current[0], tracer)
    with _lock:
        if _explicit is not None and _explicit is not tracer:
            raise _already_active(_explicit, tracer)
        entry = _open.get(id(tracer))
        _open[id(tracer)] = (tracer, (entry[1] if entry is not None else 0) + 1)
    _current.set((tracer, (current[1] if current is not None else 0) + 1))


def exit_active_tracer(tracer: Tracer) -> None:
    """Release one open trace context of `tracer`; it stops being active after its last one."""
    current = _current.get()
    if current is not None and current[0] is tracer:
        _current.set((tracer, current[1] - 1) if current[1] > 1 else None)
    with _lock:
        entry = _open.get(id(tracer))
        if entry is None:
            return
        if entry[1] <= 1:
            del _open[id(tracer)]
        else:
            _open[id(tracer)] = (tracer, entry[1] - 1)
