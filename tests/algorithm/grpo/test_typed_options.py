"""GRPO's `vllm=` and `proxy=` options as typed objects (`VllmOptions`, `ProxyOptions`) or as dicts of their fields."""

from __future__ import annotations

import pytest

from agentlightning.algorithm.grpo import GRPO, ProxyOptions, VllmOptions


def test_typed_proxy_options_are_the_dict_of_the_fields_they_set() -> None:
    typed = GRPO(proxy=ProxyOptions(bind_host="0.0.0.0", host="machine-a", api_key="key"))
    as_dict = GRPO(proxy={"bind_host": "0.0.0.0", "host": "machine-a", "api_key": "key"})
    assert (
        typed.proxy_options == as_dict.proxy_options == {"bind_host": "0.0.0.0", "host": "machine-a", "api_key": "key"}
    )


def test_typed_vllm_options_are_the_dict_of_the_fields_they_set() -> None:
    typed = GRPO(serving="vllm", vllm=VllmOptions(url="http://127.0.0.1:8000", args=["--enforce-eager"]))
    as_dict = GRPO(serving="vllm", vllm={"url": "http://127.0.0.1:8000", "args": ["--enforce-eager"]})
    assert (
        typed.serving_choice.vllm
        == as_dict.serving_choice.vllm
        == {"url": "http://127.0.0.1:8000", "args": ["--enforce-eager"]}
    )


def test_typed_vllm_options_are_checked_like_a_dict() -> None:
    with pytest.raises(ValueError, match=r"vllm publish must be one of \['adapter', 'merged'\], got 'lora'"):
        GRPO(serving="vllm", vllm=VllmOptions(publish="lora"))
    with pytest.raises(ValueError, match="vllm= options need serving='vllm'"):
        GRPO(vllm=VllmOptions())


def test_options_of_the_other_kind_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"proxy= takes a ProxyOptions or a dict"):
        GRPO(proxy=VllmOptions())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"vllm= takes a VllmOptions or a dict"):
        GRPO(serving="vllm", vllm=ProxyOptions())  # type: ignore[arg-type]
