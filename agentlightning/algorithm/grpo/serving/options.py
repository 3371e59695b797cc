"""Typed forms of GRPO's `vllm=` and `proxy=` options (`VllmOptions`, `ProxyOptions`); a dict with the same keys
works as well. A field left None (or `args` empty) is not passed on: the served component's default applies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional, Union

__all__ = ["PROXY_OPTIONS", "VLLM_OPTIONS", "ProxyOptions", "VllmOptions", "check_proxy_options", "option_dict"]


@dataclass(frozen=True)
class VllmOptions:
    """The vLLM server GRPO samples from with `serving="vllm"` (docs/vllm.md).

    Attributes:
        url: a vLLM server already running (None: GRPO starts one).
        command: what starts vLLM: its venv's Python or its CLI (default `$AGL_VLLM_COMMAND`, else `vllm` on PATH).
        args: extra `vllm serve` arguments.
        model_name: the name vLLM serves the model under.
        api_key: the key vLLM requires.
        startup_timeout: seconds to wait for a started server (default 900).
        log_path: the started server's log (default under `output_dir`).
        env: environment variables of the started server.
        publish: how new weights reach vLLM: "adapter" (LoRA adapters loaded at runtime, the default) or "merged"
            (the weights reloaded in place).
    """

    url: Optional[str] = None
    command: Union[str, Sequence[str], None] = None
    args: Sequence[str] = ()
    model_name: Optional[str] = None
    api_key: Optional[str] = None
    startup_timeout: Optional[float] = None
    log_path: Union[str, Path, None] = None
    env: Optional[dict[str, str]] = None
    publish: Optional[str] = None


@dataclass(frozen=True)
class ProxyOptions:
    """The `LLMProxy` GRPO starts when the Trainer gave none, made reachable from runners on other machines.

    Attributes:
        bind_host: the address it listens on (e.g. "0.0.0.0"; default 127.0.0.1).
        host: the address runners dial, advertised in the LLM resource.
        port: its port (default: a free one).
        api_key: the key clients must send (required off loopback; default `$AGL_PROXY_API_KEY`).
        insecure: allow listening off loopback without a key.
        num_retries: retries of a failed upstream call.
        request_timeout: seconds an upstream call may take.
    """

    bind_host: Optional[str] = None
    host: Optional[str] = None
    port: Optional[int] = None
    api_key: Optional[str] = None
    insecure: Optional[bool] = None
    num_retries: Optional[int] = None
    request_timeout: Optional[float] = None


VLLM_OPTIONS = frozenset(field.name for field in fields(VllmOptions))
"""The keys of GRPO's `vllm=` options."""
PROXY_OPTIONS = frozenset(field.name for field in fields(ProxyOptions))
"""The keyword arguments GRPO's `proxy=` passes to the `LLMProxy` it starts."""


def option_dict(
    options: Union[VllmOptions, ProxyOptions, Mapping[str, Any], None], kind: type[Union[VllmOptions, ProxyOptions]]
) -> dict[str, Any]:
    """`options` (a `kind` or a dict of its fields) as the dict of the options it sets; a dict is copied as it is
    (the caller checks its keys), anything else is a TypeError."""
    if options is None:
        return {}
    if isinstance(options, kind):
        values = {field.name: getattr(options, field.name) for field in fields(options)}
        return {name: value for name, value in values.items() if value is not None and value != ()}
    if isinstance(options, Mapping):
        return dict(options)
    argument = "vllm" if kind is VllmOptions else "proxy"
    raise TypeError(f"GRPO {argument}= takes a {kind.__name__} or a dict of its fields, got {options!r}")


def check_proxy_options(options: Union[ProxyOptions, Mapping[str, Any], None]) -> dict[str, Any]:
    """GRPO's `proxy=` options as the keyword arguments of the `LLMProxy` it starts (an unknown one: a TypeError)."""
    values = option_dict(options, ProxyOptions)
    unknown = sorted(set(values) - PROXY_OPTIONS)
    if unknown:
        raise TypeError(f"Unknown GRPO proxy option(s) {unknown}; known: {sorted(PROXY_OPTIONS)}")
    return values
