"""The proxy's model list: which upstream serves each model name (LiteLLM-style `model_list` entries).

An entry with an `"agent"` serves that agent only: a request for its model name that carries the header
`x-agl-agent: <agent>` goes there (e.g. to the agent's own LoRA adapter), requests without the header go to the
entries without an agent, and a header naming an agent no entry of that model serves is refused (never routed to the
shared model silently).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any, Optional

from typing_extensions import TypedDict

from .token_id_support import TokenIdSupport

# Provider prefixes of LiteLLM model strings that mean "an OpenAI-compatible server"; they are stripped.
AGENT_HEADER = "x-agl-agent"
"""The request header naming the agent a call is made for (routes it to that agent's model entry)."""

OPENAI_COMPATIBLE_PREFIXES = ("hosted_vllm/", "openai/", "vllm/", "text-completion-openai/", "openai_like/")


class ModelConfig(TypedDict, total=False):
    """One entry of the model list: `{"model_name": "...", "litellm_params": {"model": ..., "api_base": ...}}`."""

    model_name: str
    litellm_params: dict[str, Any]
    agent: str


class ModelListError(ValueError):
    """The model list is malformed; the message names the entry and the field."""


@dataclass(frozen=True)
class Upstream:
    """Where to send a request for one model name."""

    model_name: str
    api_base: str
    upstream_model: str
    api_key: Optional[str]
    return_token_ids: bool
    extra_body: dict[str, Any]
    agent: Optional[str] = None

    @property
    def key(self) -> str:
        return f"{self.api_base}|{self.upstream_model}"


def parse_model_config(entry: Any, position: int) -> Upstream:
    if not isinstance(entry, dict):
        raise ModelListError(f"Model list entry {position} must be a dict, got {entry!r}")
    name = entry.get("model_name")
    params = entry.get("litellm_params")
    if not isinstance(name, str) or not name:
        raise ModelListError(f"Model list entry {position} needs a non-empty 'model_name'")
    if not isinstance(params, dict):
        raise ModelListError(f"Model list entry {position} ({name}) needs a 'litellm_params' dict")
    api_base = params.get("api_base")
    model = params.get("model")
    if not isinstance(api_base, str) or not api_base.startswith(("http://", "https://")):
        raise ModelListError(f"Model {name!r}: 'litellm_params.api_base' must be an http(s) URL, got {api_base!r}")
    if not isinstance(model, str) or not model:
        raise ModelListError(f"Model {name!r}: 'litellm_params.model' must be a model string, got {model!r}")
    for prefix in OPENAI_COMPATIBLE_PREFIXES:
        if model.startswith(prefix):
            model = model[len(prefix) :]
            break
    api_key = params.get("api_key")
    agent = entry.get("agent")
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise ModelListError(f"Model {name!r}: 'agent' must be a non-empty string, got {agent!r}")
    known = {"model", "api_base", "api_key", "return_token_ids"}
    return Upstream(
        model_name=name,
        api_base=api_base.rstrip("/"),
        upstream_model=model,
        api_key=api_key if isinstance(api_key, str) else None,
        return_token_ids=bool(params.get("return_token_ids", True)),
        extra_body={key: value for key, value in params.items() if key not in known},
        agent=agent,
    )


class ModelRouter:
    """Maps model names to upstreams; several entries with one name are used in turn (round robin).

    Args:
        model_list: LiteLLM-style entries.
        request_token_ids: ask upstreams for token ids (each entry can still opt out with `return_token_ids: false`).
        token_ids: the memory of upstreams that refused `return_token_ids` (re-probed after a while).
    """

    def __init__(
        self,
        model_list: list[ModelConfig],
        *,
        request_token_ids: bool = True,
        token_ids: Optional[TokenIdSupport] = None,
    ) -> None:
        upstreams = [parse_model_config(entry, position) for position, entry in enumerate(model_list)]
        self.model_names: list[str] = list(dict.fromkeys(upstream.model_name for upstream in upstreams))
        self._by_name: dict[tuple[str, Optional[str]], list[Upstream]] = {}
        for upstream in upstreams:
            self._by_name.setdefault((upstream.model_name, upstream.agent), []).append(upstream)
        self._cycles = {key: itertools.cycle(entries) for key, entries in self._by_name.items()}
        self._lock = threading.Lock()
        self.request_token_ids = request_token_ids
        self.token_ids = token_ids if token_ids is not None else TokenIdSupport()

    def route(self, model_name: str, agent: Optional[str] = None) -> Optional[Upstream]:
        """The next upstream for `model_name` (for `agent`'s requests: an entry of that agent); None if none."""
        cycle = self._cycles.get((model_name, agent))
        if cycle is None:
            return None
        with self._lock:
            return next(cycle)

    def agents_of(self, model_name: str) -> list[str]:
        """The agents with entries of their own for `model_name`."""
        return sorted(agent for name, agent in self._by_name if name == model_name and agent is not None)

    def wants_token_ids(self, upstream: Upstream, kind: str = "chat") -> bool:
        """Whether this call to `upstream` should ask for token ids (remembered per server and API: a server may
        know the field on chat completions but not on the Responses API)."""
        return (
            self.request_token_ids
            and upstream.return_token_ids
            and self.token_ids.wanted(token_id_server(upstream, kind))
        )


def token_id_server(upstream: Upstream, kind: str) -> str:
    """The key under which token-id support is remembered for calls of `kind` to `upstream`."""
    return upstream.api_base if kind != "responses" else f"{upstream.api_base} (Responses API)"
