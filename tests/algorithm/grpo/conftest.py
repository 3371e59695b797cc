"""Fixtures of GRPO's vLLM tests against the fake vLLM server (tests/algorithm/grpo/fake_vllm.py); torch is imported
only by the tests that use them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agentlightning.inference.server import InferenceServer

    from .fake_vllm import FakeVllm


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model saved as a Hugging Face folder named `tiny-chat`."""
    from .vllm_runs import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-chat")


@pytest.fixture(scope="module")
def backend() -> Iterator[InferenceServer]:
    """Our inference server around the tiny model: what the fake vLLM generates with."""
    from agentlightning.inference.server import InferenceServer
    from agentlightning.inference.tiny import build_tiny_engine

    with InferenceServer(build_tiny_engine(seed=0)) as server:
        yield server


@pytest.fixture
def fake(backend: InferenceServer) -> Iterator[FakeVllm]:
    """A fake vLLM serving the tiny model as "policy"."""
    from .fake_vllm import FakeVllm

    with FakeVllm(backend.endpoint, backend.engine.model_name, model_name="policy") as server:
        yield server
