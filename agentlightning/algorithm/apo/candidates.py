"""Rules for the optimizer's rewrites: clean an answer into a template, and decide whether it is usable.

Pure functions. A rewrite is junk when it is empty, unchanged, not a valid template of the seed's engine, drops a
placeholder the seed uses, introduces a placeholder the tasks cannot fill, or is absurdly long. Each rule returns a
stable reason name that APO counts in its statistics.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Optional

__all__ = [
    "SkipReason",
    "check_candidate",
    "clean_rewrite",
    "content_key",
    "describe_skips",
    "fillable_fields",
    "template_fields",
]

SkipReason = str

_FENCE = re.compile(r"```[^\n`]*\n(.*?)\n?```", re.DOTALL)
_PREAMBLE = re.compile(
    r"^\s*(?:sure[,!.]?\s*)?(?:here(?: is|'s)|below is)?[^\n]{0,30}\b(?:template|prompt)\b[^\n]{0,30}:\s*\n",
    re.IGNORECASE,
)
_JINJA_FIELD = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)")


def template_fields(template: str, engine: str = "f-string") -> set[str]:
    """The placeholder names of a template (`{name}` for f-string, `{{ name }}` for jinja and poml).

    Attribute and index access count as their root name (`{task.id}` -> `task`).

    Raises:
        ValueError: the text is not a valid f-string template (unbalanced braces) or uses positional fields.
    """
    if engine != "f-string":
        return set(_JINJA_FIELD.findall(template))
    names: set[str] = set()
    for _, field_name, _, _ in string.Formatter().parse(template):
        if field_name is None:
            continue
        root = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        if not root or root.isdigit():
            raise ValueError(f"positional placeholder {{{field_name}}} (name every placeholder)")
        names.add(root)
    return names


def fillable_fields(seed_fields: Iterable[str], tasks: Iterable[Any]) -> set[str]:
    """Placeholders a candidate may use: the seed's, plus keys that every task (if all are mappings) provides."""
    allowed = set(seed_fields)
    common: Optional[set[str]] = None
    for task in tasks:
        if not isinstance(task, Mapping):
            return allowed
        keys = {str(key) for key in task}
        common = keys if common is None else common & keys
    return allowed | (common or set())


def clean_rewrite(text: Optional[str]) -> str:
    """The template inside an optimizer answer: the fenced block if there is one, without a "Here is..." line."""
    if not text:
        return ""
    fenced: list[str] = _FENCE.findall(text)
    body = max(fenced, key=len) if fenced else text
    text = _PREAMBLE.sub("", body, count=1).strip()
    for quote in ('"""', "'''", '"'):
        if len(text) > 2 * len(quote) and text.startswith(quote) and text.endswith(quote):
            text = text[len(quote) : -len(quote)].strip()
            break
    return text


def check_candidate(
    text: str,
    *,
    engine: str,
    required_fields: AbstractSet[str],
    allowed_fields: AbstractSet[str],
    parent_text: str,
    max_chars: int,
) -> Optional[SkipReason]:
    """None if `text` is a usable template, else the reason it is skipped."""
    if not text.strip():
        return "empty_rewrite"
    if text.strip() == parent_text.strip():
        return "unchanged"
    if len(text) > max_chars:
        return "too_long"
    try:
        fields = template_fields(text, engine)
    except ValueError:
        return "malformed_template"
    if required_fields - fields:
        return "lost_placeholders"
    if fields - allowed_fields:
        return "unknown_placeholders"
    return None


def content_key(value: Any) -> str:
    """A short stable digest of a task or a prompt (of its canonical JSON), so equal values share cache entries."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def describe_skips(skipped: Mapping[str, int]) -> str:
    """ "3 unchanged, 1 lost_placeholders" (or "none")."""
    parts: Sequence[str] = [f"{count} {reason}" for reason, count in sorted(skipped.items()) if count]
    return ", ".join(parts) if parts else "none"
