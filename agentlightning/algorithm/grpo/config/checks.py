"""The checks the settings sections share: each raises a ValueError naming the setting and the value it refused."""

from __future__ import annotations

import math
from typing import Any


def positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def optional_positive_int(name: str, value: Any) -> None:
    if value is not None:
        positive_int(name, value)


def positive_number(name: str, value: Any) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def non_negative_number(name: str, value: Any) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")


def finite_number(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def one_of(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        allowed = " or ".join([", ".join(repr(c) for c in choices[:-1]), repr(choices[-1])])
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
