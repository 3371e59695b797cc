"""The local inference engine on a tiny random model: sampling, stopping, logprobs, streaming, weight swaps."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

from safetensors.torch import save_model  # noqa: E402

from agentlightning.inference.engine import InferenceEngine, WeightsError  # noqa: E402
from agentlightning.inference.sampling import SamplingError, SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402


@pytest.fixture(scope="module")
def engine() -> InferenceEngine:
    return build_tiny_engine(seed=0)


@pytest.fixture(scope="module")
def prompt(engine: InferenceEngine) -> list[int]:
    return engine.chat_prompt([{"role": "user", "content": "What is 2+2?"}])


def test_chat_prompt_applies_the_chat_template(engine: InferenceEngine, prompt: list[int]) -> None:
    text = engine.tokenizer.decode(prompt)
    assert text.startswith("<|im_start|>user\nWhat is 2+2?<|im_end|>")
    assert text.endswith("<|im_start|>assistant\n")


def test_greedy_generation_is_deterministic(engine: InferenceEngine, prompt: list[int]) -> None:
    first = engine.generate(prompt, SamplingParams(max_tokens=12, temperature=0))
    second = engine.generate(prompt, SamplingParams(max_tokens=12, temperature=0))
    assert first[0].token_ids == second[0].token_ids
    assert len(first[0].token_ids) == 12 and first[0].finish_reason == "length"
    assert first[0].text == engine.decode(first[0].token_ids)


def test_seeded_sampling_is_reproducible_and_seeds_differ(engine: InferenceEngine, prompt: list[int]) -> None:
    params = {"max_tokens": 16, "temperature": 1.0, "n": 3}
    first = engine.generate(prompt, SamplingParams(seed=7, **params))
    again = engine.generate(prompt, SamplingParams(seed=7, **params))
    other = engine.generate(prompt, SamplingParams(seed=8, **params))
    assert [s.token_ids for s in first] == [s.token_ids for s in again]
    assert [s.token_ids for s in first] != [s.token_ids for s in other]
    assert [s.index for s in first] == [0, 1, 2]
    assert len({tuple(s.token_ids) for s in first}) > 1


def test_a_stop_token_ends_the_sequence_and_stays_in_its_token_ids(engine: InferenceEngine, prompt: list[int]) -> None:
    greedy = engine.generate(prompt, SamplingParams(max_tokens=4, temperature=0))[0].token_ids
    stopped = engine.generate(prompt, SamplingParams(max_tokens=4, temperature=0, stop_token_ids=[greedy[0]]))[0]
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == [greedy[0]]
    assert stopped.text == ""


def test_stop_strings_cut_the_text(engine: InferenceEngine, prompt: list[int]) -> None:
    full = engine.generate(prompt, SamplingParams(max_tokens=20, temperature=1.0, seed=3))[0]
    marker = full.text[3:5]
    cut = engine.generate(prompt, SamplingParams(max_tokens=20, temperature=1.0, seed=3, stop=[marker]))[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.find(marker)]


def test_logprobs_cover_every_generated_token(engine: InferenceEngine, prompt: list[int]) -> None:
    result = engine.generate(prompt, SamplingParams(max_tokens=6, temperature=0, logprobs=True, top_logprobs=3))[0]
    assert [entry.token_id for entry in result.logprobs] == result.token_ids
    assert all(entry.logprob <= 0 and len(entry.top) == 3 for entry in result.logprobs)
    assert all(entry.top[0][2] >= entry.logprob for entry in result.logprobs)


def test_streamed_deltas_add_up_to_the_full_result(engine: InferenceEngine, prompt: list[int]) -> None:
    params = SamplingParams(max_tokens=15, temperature=1.0, seed=11, n=2)
    tokens: dict[int, list[int]] = {0: [], 1: []}
    texts: dict[int, str] = {0: "", 1: ""}
    finish: dict[int, str] = {}
    final = []
    for sequences in engine.stream(prompt, params):
        final = sequences
        for delta in engine.deltas(sequences, params):
            tokens[delta.index] += delta.token_ids
            texts[delta.index] += delta.text
            if delta.finish_reason:
                finish[delta.index] = delta.finish_reason
    reference = engine.generate(prompt, SamplingParams(max_tokens=15, temperature=1.0, seed=11, n=2))
    for index in (0, 1):
        assert tokens[index] == final[index].token_ids == reference[index].token_ids
        assert texts[index] == reference[index].text
        assert finish[index] == reference[index].finish_reason


@pytest.mark.parametrize(
    "params, message",
    [
        (SamplingParams(max_tokens=0), "max_tokens"),
        (SamplingParams(top_p=0), "top_p"),
        (SamplingParams(temperature=-1), "temperature"),
        (SamplingParams(n=0), "n must be"),
        (SamplingParams(max_tokens=5000), "context"),
        (SamplingParams(top_k=0), "top_k"),
    ],
)
def test_invalid_sampling_parameters_are_rejected(
    engine: InferenceEngine, prompt: list[int], params: SamplingParams, message: str
) -> None:
    with pytest.raises(SamplingError, match=message):
        engine.generate(prompt, params)


def test_token_ids_outside_the_vocabulary_are_rejected(engine: InferenceEngine) -> None:
    with pytest.raises(ValueError, match="vocabulary"):
        engine.generate([10**6], SamplingParams(max_tokens=2))


def test_new_weights_are_swapped_in_without_a_restart(tmp_path: Path, prompt: list[int]) -> None:
    engine = build_tiny_engine(seed=0)
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=5, logprobs=True)
    before = engine.generate(prompt, params)[0]
    donor = build_tiny_engine(seed=1)
    save_model(donor.model, str(tmp_path / "model.safetensors"))
    engine.load_weights(tmp_path, version="v2")
    after = engine.generate(prompt, params)[0]
    expected = donor.generate(prompt, params)[0]
    assert engine.weights_version == "v2"
    assert after.token_ids == expected.token_ids
    assert [e.logprob for e in after.logprobs] == pytest.approx([e.logprob for e in expected.logprobs])
    assert [e.logprob for e in after.logprobs] != pytest.approx([e.logprob for e in before.logprobs])


def test_weights_of_another_shape_are_rejected_and_keep_the_old_ones(prompt: list[int]) -> None:
    engine = build_tiny_engine(seed=0)
    params = SamplingParams(max_tokens=6, temperature=0, logprobs=True)
    before = [e.logprob for e in engine.generate(prompt, params)[0].logprobs]
    other = build_tiny_engine(seed=0, hidden_size=16)
    with pytest.raises(WeightsError, match="shape"):
        engine.load_weights(other.model.state_dict(), version="bad")
    assert engine.weights_version == "base"
    assert [e.logprob for e in engine.generate(prompt, params)[0].logprobs] == pytest.approx(before)


def test_a_missing_weights_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="No weights file"):
        build_tiny_engine().load_weights(tmp_path / "nowhere", version="v9")
