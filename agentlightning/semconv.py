"""Names of the spans and attributes Agent Lightning writes and reads (its semantic conventions).

Span names
    `agentlightning.reward` (a reward), `agentlightning.annotation` (rewards, tags, links and metadata attached to a
    part of a rollout), `agentlightning.message`, `agentlightning.object`, `agentlightning.exception`,
    `agentlightning.operation` (a traced function call) and `agentlightning.virtual` (a span the adapter invents to
    stand for a missing parent).

Reward attributes
    A reward span carries one or more named dimensions flattened as `agentlightning.reward.<i>.name` and
    `agentlightning.reward.<i>.value`; dimension 0 is the primary reward. Reward spans also carry the v0.2 attribute
    `reward` (the primary value) so that v0.2 readers keep working.

Resource attributes
    `agentlightning.rollout_id`, `agentlightning.attempt_id`, `agentlightning.span_sequence_id` and
    `agentlightning.tracer.name` tie spans exported over OTLP to a rollout attempt.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict

__all__ = [
    "AGL_ANNOTATION",
    "AGL_EXCEPTION",
    "AGL_MESSAGE",
    "AGL_OBJECT",
    "AGL_OPERATION",
    "AGL_REWARD",
    "AGL_VIRTUAL",
    "LEGACY_MESSAGE_ATTRIBUTE",
    "LEGACY_OBJECT_ATTRIBUTE",
    "LEGACY_REWARD_ATTRIBUTE",
    "LightningResourceAttributes",
    "LightningSpanAttributes",
    "LinkPydanticModel",
    "RewardPydanticModel",
]

AGL_REWARD = "agentlightning.reward"
"""Span name of a reward emitted with `emit_reward`."""

AGL_ANNOTATION = "agentlightning.annotation"
"""Span name of an annotation: rewards, tags, links or metadata attached to a part of a rollout."""

AGL_MESSAGE = "agentlightning.message"
"""Span name of a free-text message."""

AGL_OBJECT = "agentlightning.object"
"""Span name of an arbitrary (JSON-serialisable) object."""

AGL_EXCEPTION = "agentlightning.exception"
"""Span name of a recorded exception (attributes follow the OpenTelemetry `exception.*` conventions)."""

AGL_OPERATION = "agentlightning.operation"
"""Span name of a traced operation (a function call with its inputs and output)."""

AGL_VIRTUAL = "agentlightning.virtual"
"""Span name of a synthetic span the adapter creates for a parent that is missing from a trace."""

LEGACY_REWARD_ATTRIBUTE = "reward"
"""v0.2 attribute holding the (single) reward value of an `agentlightning.reward` span."""

LEGACY_MESSAGE_ATTRIBUTE = "message"
"""v0.2 attribute holding the text of an `agentlightning.message` span."""

LEGACY_OBJECT_ATTRIBUTE = "object"
"""v0.2 attribute holding the JSON text of an `agentlightning.object` span."""


class LightningResourceAttributes(str, Enum):
    """OpenTelemetry resource attributes that tie exported spans to a rollout attempt."""

    ROLLOUT_ID = "agentlightning.rollout_id"
    ATTEMPT_ID = "agentlightning.attempt_id"
    SPAN_SEQUENCE_ID = "agentlightning.span_sequence_id"
    TRACER_NAME = "agentlightning.tracer.name"


class LightningSpanAttributes(str, Enum):
    """Span attribute names (or prefixes) used by Agent Lightning's own spans."""

    REWARD = "agentlightning.reward"
    """Prefix of the reward dimensions: `agentlightning.reward.<i>.name` / `.value` (dimension 0 is primary)."""

    LINK = "agentlightning.link"
    """Prefix of links to other spans: `agentlightning.link.<i>.key_match` / `.value_match`."""

    TAG = "agentlightning.tag"
    """Prefix of free-form tags: `agentlightning.tag.<i>`."""

    MESSAGE_BODY = "agentlightning.message.body"
    """Text of a message span."""

    OBJECT_TYPE = "agentlightning.object.type"
    """Python type name of the object in an object span."""

    OBJECT_LITERAL = "agentlightning.object.literal"
    """The value of an object span when it is a plain str/int/float/bool."""

    OBJECT_JSON = "agentlightning.object.json"
    """The JSON text of an object span when it is not a plain literal."""

    OPERATION_NAME = "agentlightning.operation.name"
    """Name of the traced operation (by default the function's qualified name)."""

    OPERATION_INPUT = "agentlightning.operation.input"
    """Prefix of the operation's inputs: `agentlightning.operation.input.<argument>`."""

    OPERATION_OUTPUT = "agentlightning.operation.output"
    """The operation's return value (flattened under this prefix when it is a mapping or a list)."""


class RewardPydanticModel(BaseModel):
    """One reward dimension: a name and a numeric value."""

    model_config = ConfigDict(defer_build=True)

    name: str
    value: float


class LinkPydanticModel(BaseModel):
    """A link from an annotation to the spans whose attribute `key_match` equals `value_match`.

    For example `LinkPydanticModel(key_match="gen_ai.response.id", value_match="chatcmpl-1")` ties a reward to one
    LLM response.
    """

    model_config = ConfigDict(defer_build=True)

    key_match: str
    value_match: str
