"""Classes the component builder tests load by import path."""

from __future__ import annotations

from typing import Any


class Plain:
    def __init__(self, a: int = 1, b: str = "x") -> None:
        self.a = a
        self.b = b


class OnlyKwargs:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class Sub(Plain):
    pass
