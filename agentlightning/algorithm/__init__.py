"""Algorithms: the learning side of a run (what to enqueue, how to learn from the spans, what to publish)."""

from __future__ import annotations

from .base import Algorithm
from .fast import FastAlgorithm

__all__ = ["Algorithm", "FastAlgorithm"]
