"""Zero-code capture of Pydantic AI agents (agent runs and tool runs, named as the agents are named).

Pydantic AI traces itself with the OpenTelemetry GenAI conventions once its instrumentation is on, which it is not by
default: `instrument_pydantic_ai` turns it on for every agent (`Agent.instrument_all`), reporting to the global
tracer provider that Agent Lightning records. A run is an `invoke_agent <name>` span carrying `gen_ai.agent.name`, so
`agent_match` selects an agent by the name it was given (`Agent(model, name="calculator")`), with no
`agl.operation`; each tool run is an `execute_tool <tool>` span (`gen_ai.tool.name`); each model request a
`chat <model>` span around the OpenAI SDK's span of the call. The adapters count the call once: the SDK's span
(recorded by `instrument_openai`, with the token ids) is the LLM call, Pydantic AI's `chat` span is not one.
Message content is left out of Pydantic AI's spans (`include_content=False`): the SDK's span holds the prompt and
completion already.

Instrumentation the application set up itself is left alone: an `Agent.instrument_all(...)` made before (logfire's
`instrument_pydantic_ai()`, say) stays in force and is not undone here, and an agent built with `instrument=...`
(`instrument=False` included) follows its own setting.
"""

from __future__ import annotations

from typing import Any, Optional

from ._openinference import InstrumentationUnavailableError, install_hint

__all__ = ["instrument_pydantic_ai", "uninstrument_pydantic_ai"]

_ours: Optional[Any] = None  # the InstrumentationSettings this module made the default for all agents


def _agent_class() -> Any:
    try:
        from pydantic_ai import Agent
    except ImportError as exc:
        raise InstrumentationUnavailableError(
            f"pydantic_ai is not installed; install it with `{install_hint('pydantic-ai')}`"
        ) from exc
    return Agent


def _default(agent_class: Any) -> Any:
    """What `Agent.instrument_all` last set (pydantic-ai offers no public reader; False, its default, when absent)."""
    return getattr(agent_class, "_instrument_default", False)


def instrument_pydantic_ai() -> bool:
    """Turn Pydantic AI's instrumentation on for every agent (idempotent). Returns True once it is on.

    Raises:
        InstrumentationUnavailableError: pydantic-ai is not installed.
    """
    global _ours
    agent_class = _agent_class()
    current = _default(agent_class)
    if current:  # already on: ours, or the application's own (kept as it is)
        return True
    from pydantic_ai.models.instrumented import InstrumentationSettings

    settings = InstrumentationSettings(include_content=False)
    agent_class.instrument_all(settings)
    _ours = settings
    return True


def uninstrument_pydantic_ai() -> None:
    """Turn off what `instrument_pydantic_ai` turned on (an instrumentation the application set is left on)."""
    global _ours
    try:
        agent_class = _agent_class()
    except ImportError:
        return
    if _ours is not None and _default(agent_class) is _ours:
        agent_class.instrument_all(False)
    _ours = None
