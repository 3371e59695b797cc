"""Server-sent events as the OpenAI-style streams carry them: the JSON objects of an event's `data:` lines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["data_objects"]


def data_objects(lines: Iterable[bytes]) -> list[dict[str, Any]]:
    """The JSON objects of the `data:` lines among `lines` (`[DONE]`, empty, non-JSON and non-object data
    skipped)."""
    objects = []
    for line in lines:
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            continue
        try:
            parsed = json.loads(data)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            objects.append(parsed)
    return objects
