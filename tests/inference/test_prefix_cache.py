"""Kept prompt prefixes: prompts that share a long beginning compute it once, with the answers they get without."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

from agentlightning.inference.engine import InferenceEngine  # noqa: E402
from agentlightning.inference.prefixes import PrefixCache  # noqa: E402
from agentlightning.inference.sampling import SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402

SYSTEM = "You are a careful calculator. Use the tools, then reply with just the number. " * 2


def _prompt(engine: InferenceEngine, question: str) -> list[int]:
    return engine.chat_prompt([{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}])


QUESTIONS = ["What is 2 + 3?", "How many eggs are in 4 boxes of 6?", "Name a colour.", "ok"]
PARAMS = SamplingParams(max_tokens=12, temperature=0, logprobs=True)


def _answers(engine: InferenceEngine, questions: list[str]) -> list:
    return [engine.generate(_prompt(engine, q), PARAMS)[0] for q in questions]


def _without_prefix_cache(engine: InferenceEngine) -> InferenceEngine:
    engine._scheduler.prefixes.enabled = False
    return engine


def test_prompts_after_a_kept_prefix_get_the_answers_they_get_without_it() -> None:
    expected = _answers(_without_prefix_cache(build_tiny_engine(seed=0)), QUESTIONS)
    engine = build_tiny_engine(seed=0)
    answers = _answers(engine, QUESTIONS)
    prefixes = engine._scheduler.prefixes
    assert len(prefixes) == 1 and prefixes.hits == 2  # learnt from the first two prompts, used by the next two
    assert prefixes.saved_tokens >= 2 * len(SYSTEM)
    for got, want in zip(answers, expected, strict=True):
        assert got.token_ids == want.token_ids
        assert [e.logprob for e in got.logprobs] == pytest.approx([e.logprob for e in want.logprobs], abs=1e-4)


def test_a_batch_of_prompts_after_a_kept_prefix_matches_them_alone() -> None:
    engine = build_tiny_engine(seed=0)
    _answers(engine, QUESTIONS[:2])  # keeps the shared prefix
    alone = _answers(_without_prefix_cache(build_tiny_engine(seed=0)), QUESTIONS)

    async def together() -> list:
        with engine.paused():
            tasks = [asyncio.ensure_future(engine.agenerate(_prompt(engine, q), PARAMS)) for q in QUESTIONS]
            await asyncio.sleep(0)
        return await asyncio.gather(*tasks)

    hits = engine._scheduler.prefixes.hits
    batched = asyncio.run(together())
    assert engine._scheduler.prefixes.hits == hits + len(QUESTIONS)
    assert [b[0].token_ids for b in batched] == [a.token_ids for a in alone]


def test_new_weights_drop_the_kept_prefixes() -> None:
    engine = build_tiny_engine(seed=0)
    _answers(engine, QUESTIONS[:2])
    assert len(engine._scheduler.prefixes) == 1
    state = {name: tensor * 1.01 for name, tensor in engine.model.state_dict().items()}
    engine.load_weights(state, "v2")
    assert len(engine._scheduler.prefixes) == 0
    fresh = build_tiny_engine(seed=0)
    _without_prefix_cache(fresh).load_weights(state, "v2")
    assert [a.token_ids for a in _answers(engine, QUESTIONS)] == [a.token_ids for a in _answers(fresh, QUESTIONS)]


def test_weights_updated_in_place_drop_the_kept_prefixes_and_name_the_version() -> None:
    engine = build_tiny_engine(seed=0)
    _answers(engine, QUESTIONS[:2])
    with engine.paused(), torch.no_grad():
        for parameter in engine.model.parameters():
            parameter.mul_(1.01)
        engine.weights_updated("v2")
    assert len(engine._scheduler.prefixes) == 0 and engine.weights_version == "v2"
    fresh = _without_prefix_cache(build_tiny_engine(seed=0))
    fresh.load_weights({name: tensor * 1.01 for name, tensor in fresh.model.state_dict().items()}, "v2")
    assert [a.token_ids for a in _answers(engine, QUESTIONS)] == [a.token_ids for a in _answers(fresh, QUESTIONS)]


def test_a_prefix_is_kept_only_when_long_enough_and_not_already_covered() -> None:
    cache = PrefixCache(min_length=4)
    assert cache.candidate([1, 2, 3, 4, 5, 6]) == 0  # nothing to compare with yet
    assert cache.candidate([1, 2, 3, 4, 5, 7]) == 5
    cache.keep([1, 2, 3, 4, 5], [], [])
    assert cache.candidate([1, 2, 3, 4, 5, 8]) == 0  # the kept prefix covers it
    assert cache.candidate([9, 9, 9]) == 0  # too short a match
    assert cache.find([[1, 2, 3, 4, 5, 9], [1, 2, 3, 4, 5, 6, 7]]) is not None
    assert cache.find([[1, 2, 3, 4, 5]]) is None  # a prompt must go beyond the prefix
