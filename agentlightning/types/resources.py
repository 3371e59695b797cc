"""Tunable resources: the things an algorithm improves and a runner hands to the agent (LLM endpoints, prompts)."""

from __future__ import annotations

import inspect
import logging
import time
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from .core import AttemptedRollout

__all__ = [
    "LLM",
    "NamedResources",
    "PromptTemplate",
    "ProxyLLM",
    "Resource",
    "ResourceUnion",
    "ResourcesUpdate",
]

logger = logging.getLogger(__name__)


class Resource(BaseModel):
    """Base class of every tunable resource; `resource_type` is the discriminator."""

    # NaN and Infinity travel as such (not as null), so the store that receives them can refuse them.
    model_config = ConfigDict(defer_build=True, ser_json_inf_nan="constants")

    resource_type: Any


class LLM(Resource):
    """An OpenAI-compatible model endpoint with its sampling parameters."""

    resource_type: Literal["llm"] = "llm"
    endpoint: str
    model: str
    api_key: Optional[str] = None
    sampling_parameters: dict[str, Any] = Field(default_factory=dict)

    def get_base_url(self, *args: Any, **kwargs: Any) -> str:
        """The base URL to give an OpenAI client. Plain LLMs ignore the rollout arguments."""
        return self.endpoint


class ProxyLLM(LLM):
    """An LLM served through the LLM proxy, which needs the rollout and attempt ids in its URL.

    Use `get_base_url(rollout_id, attempt_id)` or `with_attempted_rollout(rollout)` rather than `endpoint`.
    """

    resource_type: Literal["proxy_llm"] = "proxy_llm"  # type: ignore[assignment]
    _initialized: bool = False

    def model_post_init(self, context: Any, /) -> None:
        self._initialized = True

    def __getattribute__(self, name: str) -> Any:
        if name == "endpoint":
            try:
                private = object.__getattribute__(self, "__pydantic_private__")
                initialized = bool(private and private.get("_initialized"))
            except AttributeError:
                initialized = False
            if initialized:
                caller = inspect.currentframe()
                caller = caller.f_back if caller is not None else None
                if caller is None or caller.f_code.co_name != "get_base_url":
                    logger.warning(
                        "ProxyLLM.endpoint is the bare proxy address; call get_base_url(rollout_id, attempt_id) "
                        "so that LLM calls are attributed to their rollout."
                    )
        return super().__getattribute__(name)

    def get_base_url(self, rollout_id: Optional[str], attempt_id: Optional[str]) -> str:  # type: ignore[override]
        """The proxy URL that routes calls to `rollout_id`/`attempt_id`, keeping a trailing `/v1`."""
        if rollout_id is None and attempt_id is None:
            return self.endpoint
        if not isinstance(rollout_id, str) or not isinstance(attempt_id, str):
            raise ValueError("rollout_id and attempt_id must be strings or all be empty")
        base = self.endpoint
        if base.endswith("/"):
            base = base[:-1]
        has_v1 = base.endswith("/v1")
        if has_v1:
            base = base[: -len("/v1")]
        base = f"{base}/rollout/{rollout_id}/attempt/{attempt_id}"
        return base + "/v1" if has_v1 else base

    def with_attempted_rollout(self, rollout: AttemptedRollout) -> LLM:
        """A plain `LLM` whose endpoint is bound to this rollout attempt."""
        return LLM(
            endpoint=self.get_base_url(rollout.rollout_id, rollout.attempt.attempt_id),
            model=self.model,
            sampling_parameters=dict(self.sampling_parameters),
            api_key=self.api_key,
        )


class PromptTemplate(Resource):
    """A prompt with placeholders. Only the "f-string" engine renders locally."""

    resource_type: Literal["prompt_template"] = "prompt_template"
    template: str
    engine: Literal["jinja", "f-string", "poml"]

    def format(self, **kwargs: Any) -> str:
        """Render the template with `kwargs`."""
        if self.engine == "f-string":
            return self.template.format(**kwargs)
        raise NotImplementedError(f"Rendering PromptTemplate with engine {self.engine!r} is not supported")


ResourceUnion = Annotated[Union[LLM, ProxyLLM, PromptTemplate], Field(discriminator="resource_type")]
NamedResources = dict[str, ResourceUnion]


class ResourcesUpdate(BaseModel):
    """A versioned snapshot of named resources.

    `version` starts at 1 and grows each time the same `resources_id` is updated; `create_time` and `update_time`
    default to now so that 0.2-style construction with only an id and resources keeps working.
    """

    model_config = ConfigDict(defer_build=True)

    resources_id: str
    create_time: float = Field(default_factory=time.time)
    update_time: float = Field(default_factory=time.time)
    version: int = Field(default=1, ge=1)
    resources: NamedResources
