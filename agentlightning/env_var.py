"""Environment variables Agent Lightning reads, and strict parsers for them.

An explicit argument always wins over the environment; a malformed value raises a ValueError naming the variable.
"""

from __future__ import annotations

import os
from enum import Enum
from typing import Optional, Union

__all__ = [
    "LightningEnvVar",
    "resolve_bool_env_var",
    "resolve_int_env_var",
    "resolve_managed_store_flag",
    "resolve_str_env_var",
]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class LightningEnvVar(str, Enum):
    AGL_EMITTER_DEBUG = "AGL_EMITTER_DEBUG"
    """Log every span an emitter records (at INFO level)."""
    AGL_MANAGED_STORE = "AGL_MANAGED_STORE"
    """Whether the execution strategy starts and owns the store server (default true)."""
    AGL_CURRENT_ROLE = "AGL_CURRENT_ROLE"
    """The role of this process: algorithm, runner or both."""
    AGL_SERVER_HOST = "AGL_SERVER_HOST"
    AGL_SERVER_PORT = "AGL_SERVER_PORT"
    AGL_REQUEST_TOKEN_IDS = "AGL_REQUEST_TOKEN_IDS"
    """Zero-code capture asks OpenAI-compatible servers for token ids inside trace contexts (default true)."""


def _name(env: Union[LightningEnvVar, str]) -> str:
    return env.value if isinstance(env, LightningEnvVar) else env


def resolve_str_env_var(
    env: Union[LightningEnvVar, str], override: Optional[str] = None, fallback: Optional[str] = None
) -> Optional[str]:
    """`override` if given, else the variable's value if set and non-empty, else `fallback`."""
    if override is not None:
        return override
    value = os.environ.get(_name(env))
    return value if value else fallback


def resolve_bool_env_var(
    env: Union[LightningEnvVar, str], override: Optional[bool] = None, fallback: bool = False
) -> bool:
    """Booleans accept 1/0, true/false, yes/no, on/off (any case)."""
    if override is not None:
        return bool(override)
    raw = os.environ.get(_name(env))
    if raw is None or raw.strip() == "":
        return fallback
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{_name(env)}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def resolve_int_env_var(
    env: Union[LightningEnvVar, str], override: Optional[int] = None, fallback: Optional[int] = None
) -> Optional[int]:
    if override is not None:
        return int(override)
    raw = os.environ.get(_name(env))
    if raw is None or raw.strip() == "":
        return fallback
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"{_name(env)}={raw!r} is not an integer") from None


def resolve_managed_store_flag(value: Optional[bool] = None) -> bool:
    """Whether the store server is managed by the execution strategy (`AGL_MANAGED_STORE`, default true)."""
    return resolve_bool_env_var(LightningEnvVar.AGL_MANAGED_STORE, value, fallback=True)
