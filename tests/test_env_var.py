"""Environment variables: explicit arguments win, malformed values are named in the error."""

from __future__ import annotations

import logging

import pytest

import agentlightning as agl
from agentlightning.env_var import (
    LightningEnvVar,
    resolve_bool_env_var,
    resolve_int_env_var,
    resolve_managed_store_flag,
    resolve_str_env_var,
)


@pytest.mark.parametrize("raw, expected", [("1", True), ("TRUE", True), ("yes", True), ("off", False), ("0", False)])
def test_booleans_accept_the_usual_spellings(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("AGL_MANAGED_STORE", raw)
    assert resolve_managed_store_flag() is expected


def test_an_explicit_value_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_SERVER_PORT", "4747")
    assert resolve_int_env_var(LightningEnvVar.AGL_SERVER_PORT, 9999) == 9999
    assert resolve_int_env_var(LightningEnvVar.AGL_SERVER_PORT) == 4747


def test_unset_or_empty_variables_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGL_CURRENT_ROLE", raising=False)
    assert resolve_str_env_var(LightningEnvVar.AGL_CURRENT_ROLE, fallback="both") == "both"
    monkeypatch.setenv("AGL_CURRENT_ROLE", "")
    assert resolve_str_env_var(LightningEnvVar.AGL_CURRENT_ROLE, fallback="both") == "both"
    monkeypatch.delenv("AGL_MANAGED_STORE", raising=False)
    assert resolve_managed_store_flag() is True


def test_malformed_values_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_SERVER_PORT", "forty")
    with pytest.raises(ValueError, match="AGL_SERVER_PORT='forty' is not an integer"):
        resolve_int_env_var(LightningEnvVar.AGL_SERVER_PORT)
    monkeypatch.setenv("AGL_EMITTER_DEBUG", "maybe")
    with pytest.raises(ValueError, match="AGL_EMITTER_DEBUG='maybe' is not a boolean"):
        resolve_bool_env_var(LightningEnvVar.AGL_EMITTER_DEBUG)


def test_emitter_debug_logs_every_emitted_span(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGL_EMITTER_DEBUG", "1")
    with caplog.at_level(logging.INFO, logger="agentlightning.emitter"):
        agl.emit_message("hello", propagate=False)
    assert "Emitting span" in caplog.text and "hello" in caplog.text
