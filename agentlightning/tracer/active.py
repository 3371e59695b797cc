"""The process-wide active tracer: the tracer emitters send their spans to.

A tracer becomes active when one of its trace contexts opens and stops being active when its last open context
closes. Several contexts of the same tracer may be open at once (for example concurrent rollouts in one process);
activating a *different* tracer while one is active is an error, because emitted spans would reach only one of them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .base import Tracer

__all__ = ["clear_active_tracer", "get_active_tracer", "set_active_tracer"]

_lock = threading.Lock()
_active: Optional[Tracer] = None
_depth = 0


def _activate(tracer: Tracer, counted: bool) -> None:
    global _active, _depth
    with _lock:
        if _active is not None and _active is not tracer:
            raise RuntimeError(
                f"Tracer {_active!r} is already active; close its trace context before activating {tracer!r}"
            )
        _active = tracer
        _depth = _depth + 1 if counted else max(_depth, 1)


def set_active_tracer(tracer: Tracer) -> None:
    """Make `tracer` the active tracer.

    Raises:
        RuntimeError: another tracer is already active.
    """
    _activate(tracer, counted=False)


def get_active_tracer() -> Optional[Tracer]:
    """The active tracer, or None when no trace context is open."""
    return _active


def clear_active_tracer() -> None:
    """Forget the active tracer (whatever contexts are still open)."""
    global _active, _depth
    with _lock:
        _active = None
        _depth = 0


def enter_active_tracer(tracer: Tracer) -> None:
    """Activate `tracer` for one more open trace context (used by tracers; counts nested/concurrent contexts)."""
    _activate(tracer, counted=True)


def exit_active_tracer(tracer: Tracer) -> None:
    """Release one open trace context of `tracer`; the tracer stops being active after its last one."""
    global _active, _depth
    with _lock:
        if _active is not tracer:
            return
        _depth -= 1
        if _depth <= 0:
            _active = None
            _depth = 0
