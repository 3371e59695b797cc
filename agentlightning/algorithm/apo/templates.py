"""The prompts APO sends to its optimizer model: critique ("gradient") and rewrite ("apply edit") templates.

Templates are plain text with `$name` placeholders (Python's `string.Template`), so the `{placeholders}` of the
prompt being optimized pass through untouched. The defaults ship as package data (`prompts/*.txt`); users may pass
their own strings. A critique template uses `$prompt_template` and `$experiments` (runs with their conversations)
or `$span_experiments` (runs with their span traces); a rewrite template uses `$prompt_template` and `$critique`.
Rendered prompts are bounded in size: long messages and attributes are cut, and at most a few dozen spans are
shown per run.
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from .types import RolloutResultForAPO

__all__ = [
    "DEFAULT_APPLY_EDIT_TEMPLATES",
    "DEFAULT_GRADIENT_TEMPLATES",
    "Kind",
    "MetaPrompt",
    "load_default_templates",
    "render_experiments",
    "render_span_experiments",
]

MAX_TEXT_CHARS = 1500
MAX_MESSAGES_PER_RUN = 12
MAX_SPANS_PER_RUN = 30
MAX_ATTRIBUTE_CHARS = 300
MAX_RUN_CHARS = 6000

Kind = Literal["gradient", "apply_edit"]
_ALLOWED = {
    "gradient": ({"prompt_template", "experiments", "span_experiments"}, "prompt_template"),
    "apply_edit": ({"prompt_template", "critique"}, "prompt_template"),
}


def _identifiers(text: str) -> set[str]:
    names: set[str] = set()
    for match in string.Template.pattern.finditer(text):
        if match.group("invalid") is not None:
            line = text[: match.start()].count("\n") + 1
            raise ValueError(f"invalid '$' at line {line} (write $$ for a literal dollar sign)")
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name)
    return names


@dataclass(frozen=True)
class MetaPrompt:
    """A critique or rewrite template; `render` fills it and returns the chat messages to send."""

    name: str
    text: str
    kind: Kind

    def __post_init__(self) -> None:
        try:
            names = _identifiers(self.text)
        except ValueError as exc:
            raise ValueError(f"{self.kind} template {self.name!r}: {exc}") from exc
        allowed, required = _ALLOWED[self.kind]
        unknown = names - allowed
        if unknown:
            raise ValueError(
                f"{self.kind} template {self.name!r} uses unknown placeholders {sorted(unknown)}; "
                f"allowed are {sorted(allowed)} (written as $name)"
            )
        if required not in names:
            raise ValueError(f"{self.kind} template {self.name!r} must contain ${required}")
        if self.kind == "gradient" and not names & {"experiments", "span_experiments"}:
            raise ValueError(f"gradient template {self.name!r} must contain $experiments or $span_experiments")
        if self.kind == "apply_edit" and "critique" not in names:
            raise ValueError(f"apply_edit template {self.name!r} must contain $critique")

    @property
    def placeholders(self) -> set[str]:
        return _identifiers(self.text)

    def render(self, *, prompt_template: str, **context: Any) -> list[dict[str, str]]:
        """The template as one user message; experiments are rendered only if the template shows them."""
        values: dict[str, str] = {"prompt_template": prompt_template}
        names = self.placeholders
        results: Sequence[RolloutResultForAPO] = context.get("experiments", ())
        if "experiments" in names:
            values["experiments"] = render_experiments(results)
        if "span_experiments" in names:
            values["span_experiments"] = render_span_experiments(results)
        if "critique" in names:
            values["critique"] = str(context.get("critique", ""))
        return [{"role": "user", "content": string.Template(self.text).substitute(values)}]


def load_default_templates(kind: Kind) -> tuple[MetaPrompt, ...]:
    """The packaged critique (`gradient_*.txt`) or rewrite (`edit_*.txt`) templates, in name order."""
    prefix = "gradient_" if kind == "gradient" else "edit_"
    folder = resources.files("agentlightning.algorithm.apo") / "prompts"
    entries = sorted(
        (entry for entry in folder.iterdir() if entry.name.startswith(prefix) and entry.name.endswith(".txt")),
        key=lambda entry: entry.name,
    )
    return tuple(MetaPrompt(entry.name[:-4], entry.read_text(encoding="utf-8"), kind) for entry in entries)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" ...[{len(text) - limit} more characters]"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _header(index: int, result: RolloutResultForAPO) -> list[str]:
    reward = result.get("final_reward")
    lines = [f"### Run {index}", f"Status: {result.get('status')}"]
    lines.append(f"Reward: {reward}" if reward is not None else "Reward: none recorded")
    if "input" in result:
        lines.append(f"Task: {_cut(_as_text(result['input']), MAX_TEXT_CHARS)}")
    return lines


def _message_content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    text = "" if content is None else str(content)
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if calls:
        text += f" [tool calls: {_as_text(calls)}]"
    return text


def render_experiments(results: Sequence[RolloutResultForAPO]) -> str:
    """Runs as text: status, reward, task and the conversation of each LLM call (its last messages when long)."""
    if not results:
        return "(no runs)"
    blocks: list[str] = []
    for index, result in enumerate(results, start=1):
        lines = _header(index, result)
        conversations = result.get("messages") or []
        if not conversations:
            lines.append("Conversation: none recorded")
        for number, conversation in enumerate(conversations, start=1):
            messages = conversation.get("messages", []) if isinstance(conversation, dict) else conversation
            if not isinstance(messages, list):
                messages = []
            lines.append(f"Conversation {number}:")
            shown = messages[-MAX_MESSAGES_PER_RUN:]
            if len(messages) > len(shown):
                lines.append(f"  ({len(messages) - len(shown)} earlier messages left out)")
            for message in shown:
                role = message.get("role", "?") if isinstance(message, dict) else "?"
                lines.append(f"  [{role}] {_cut(_message_content(message), MAX_TEXT_CHARS)}")
        blocks.append(_cut("\n".join(lines), MAX_RUN_CHARS))
    return "\n\n".join(blocks)


def render_span_experiments(results: Sequence[RolloutResultForAPO]) -> str:
    """Runs as text: status, reward, task and each span's name with its attributes (cut to a bounded size)."""
    if not results:
        return "(no runs)"
    blocks: list[str] = []
    for index, result in enumerate(results, start=1):
        lines = _header(index, result)
        spans = result.get("spans") or []
        if not spans:
            lines.append("Spans: none recorded")
        for span in spans[:MAX_SPANS_PER_RUN]:
            attributes = span.get("attributes") or {}
            shown = ", ".join(
                f"{key}={_cut(_as_text(value), MAX_ATTRIBUTE_CHARS)}" for key, value in attributes.items()
            )
            lines.append(f"- {span.get('name')}: {shown}")
        if len(spans) > MAX_SPANS_PER_RUN:
            lines.append(f"- ... {len(spans) - MAX_SPANS_PER_RUN} more spans left out")
        blocks.append(_cut("\n".join(lines), MAX_RUN_CHARS))
    return "\n\n".join(blocks)


DEFAULT_GRADIENT_TEMPLATES = load_default_templates("gradient")
DEFAULT_APPLY_EDIT_TEMPLATES = load_default_templates("apply_edit")
