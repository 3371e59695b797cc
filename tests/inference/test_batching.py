"""Continuous batching: concurrent requests share decoding steps and get the answers they would get alone."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

from agentlightning.inference.engine import InferenceEngine, SequenceState  # noqa: E402
from agentlightning.inference.sampling import SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402

QUESTIONS = ["Hi", "What is 2+2?", "Name three colours of the rainbow, please.", "ok"]


def prompts(engine: InferenceEngine) -> list[list[int]]:
    return [engine.chat_prompt([{"role": "user", "content": q}]) for q in QUESTIONS]


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


async def generate_together(engine: InferenceEngine, requests: list[tuple[list[int], SamplingParams]]) -> list:
    """Submit all requests while generation is held, so that they are admitted into one batch."""
    with engine.paused():
        tasks = [asyncio.ensure_future(engine.agenerate(p, params)) for p, params in requests]
        await asyncio.sleep(0)  # let every task submit its request
    return await asyncio.gather(*tasks)


def test_concurrent_greedy_requests_match_their_answers_alone() -> None:
    engine = build_tiny_engine(seed=0)
    params = SamplingParams(max_tokens=10, temperature=0, logprobs=True)
    alone = [engine.generate(p, params)[0] for p in prompts(engine)]
    together = asyncio.run(generate_together(engine, [(p, params) for p in prompts(engine)]))
    assert engine.batch_stats["largest_batch"] == len(QUESTIONS)
    for single, batched in zip(alone, together, strict=True):
        assert batched[0].token_ids == single.token_ids
        assert batched[0].text == single.text
        assert [e.logprob for e in batched[0].logprobs] == pytest.approx([e.logprob for e in single.logprobs], abs=1e-4)


def test_seeded_choices_are_the_same_in_a_batch_as_alone() -> None:
    engine = build_tiny_engine(seed=0)
    requests = [(p, SamplingParams(max_tokens=12, temperature=1.0, n=3, seed=i)) for i, p in enumerate(prompts(engine))]
    alone = [[s.token_ids for s in engine.generate(p, params)] for p, params in requests]
    together = asyncio.run(generate_together(engine, requests))
    assert [[s.token_ids for s in result] for result in together] == alone
    assert engine.batch_stats["largest_batch"] == 3 * len(QUESTIONS)


def test_identical_prompts_admitted_together_are_computed_once_and_answer_as_alone() -> None:
    engine = build_tiny_engine(seed=0)
    same, other = prompts(engine)[1], prompts(engine)[2]
    requests = [(same, SamplingParams(max_tokens=8, temperature=1.0, seed=i)) for i in range(4)]
    requests.append((other, SamplingParams(max_tokens=8, temperature=1.0, seed=9)))
    alone = [engine.generate(p, params)[0].token_ids for p, params in requests]
    before = engine.batch_stats
    together = asyncio.run(generate_together(engine, requests))
    assert [result[0].token_ids for result in together] == alone
    stats = engine.batch_stats
    assert stats["prompts_prefilled"] - before["prompts_prefilled"] == 5
    assert stats["prompts_computed"] - before["prompts_computed"] == 2  # four identical prompts, one other


def test_a_request_joining_a_running_batch_gets_its_answer_alone() -> None:
    engine = build_tiny_engine(seed=0)
    long_prompt, short_prompt = prompts(engine)[2], prompts(engine)[0]
    first_params = SamplingParams(max_tokens=900, temperature=0, ignore_eos=True)  # still running when 2nd joins
    second_params = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)
    expected_first = engine.generate(long_prompt, first_params)[0].token_ids
    expected_second = engine.generate(short_prompt, second_params)[0].token_ids
    first = engine.stream(long_prompt, first_params)
    next(first)  # the first request is running
    second = engine.generate(short_prompt, second_params)[0]
    *_, last = first
    assert second.token_ids == expected_second
    assert last[0].token_ids == expected_first
    assert engine.batch_stats["largest_batch"] == 2


def test_stop_rules_apply_per_request_inside_a_batch() -> None:
    engine = build_tiny_engine(seed=0)
    prompt = prompts(engine)[1]
    greedy = engine.generate(prompt, SamplingParams(max_tokens=6, temperature=0, ignore_eos=True))[0]
    stop_token = greedy.token_ids[1]
    stopped, running = asyncio.run(
        generate_together(
            engine,
            [
                (prompt, SamplingParams(max_tokens=6, temperature=0, stop_token_ids=[stop_token])),
                (prompt, SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)),
            ],
        )
    )
    expected = greedy.token_ids[: greedy.token_ids.index(stop_token) + 1]
    assert stopped[0].finish_reason == "stop" and stopped[0].token_ids == expected
    assert running[0].finish_reason == "length" and running[0].token_ids == greedy.token_ids


def test_the_batch_never_exceeds_max_batch_size() -> None:
    engine = build_tiny_engine(seed=0, max_batch_size=2)
    params = SamplingParams(max_tokens=5, temperature=0, ignore_eos=True)
    results = asyncio.run(generate_together(engine, [(p, params) for p in prompts(engine)]))
    assert [len(r[0].token_ids) for r in results] == [5] * len(QUESTIONS)
    assert engine.batch_stats["largest_batch"] == 2


def test_a_request_with_more_choices_than_the_batch_holds_still_runs() -> None:
    engine = build_tiny_engine(seed=0, max_batch_size=2)
    params = SamplingParams(max_tokens=4, temperature=1.0, n=5, seed=1, ignore_eos=True)
    result = engine.generate(prompts(engine)[0], params)
    assert [len(s.token_ids) for s in result] == [4] * 5


def test_closing_a_stream_early_frees_its_sequences() -> None:
    engine = build_tiny_engine(seed=0)
    stream = engine.stream(prompts(engine)[0], SamplingParams(max_tokens=500, temperature=0, ignore_eos=True))
    next(stream)
    stream.close()
    wait_until(lambda: engine.batch_stats["running"] == 0, "the cancelled sequence to leave the batch")
    after = engine.generate(prompts(engine)[1], SamplingParams(max_tokens=3, temperature=0, ignore_eos=True))
    assert len(after[0].token_ids) == 3


def test_cancelling_an_async_request_frees_its_sequences() -> None:
    engine = build_tiny_engine(seed=0)

    async def scenario() -> None:
        task = asyncio.ensure_future(
            engine.agenerate(prompts(engine)[0], SamplingParams(max_tokens=800, temperature=0, ignore_eos=True))
        )
        while engine.batch_stats["running"] == 0 and not task.done():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    wait_until(lambda: engine.batch_stats["running"] == 0, "the cancelled sequence to leave the batch")


def test_a_weight_swap_lets_running_sequences_finish_on_the_old_weights() -> None:
    engine = build_tiny_engine(seed=0)
    donor = build_tiny_engine(seed=1)
    prompt = prompts(engine)[1]
    params = SamplingParams(max_tokens=80, temperature=0, ignore_eos=True)
    old_answer = engine.generate(prompt, params)[0].token_ids
    new_answer = donor.generate(prompt, params)[0].token_ids
    running = engine.stream(prompt, params)
    next(running)
    swap = threading.Thread(target=engine.load_weights, args=(donor.model.state_dict(), "v2"))
    swap.start()
    wait_until(
        lambda: engine._scheduler._exclusive_waiting > 0 or engine.weights_version == "v2", "the swap to be waiting"
    )
    later: list[SequenceState] = []
    submitted = threading.Thread(target=lambda: later.extend(engine.generate(prompt, params)))
    submitted.start()
    *_, finished = running
    swap.join(timeout=60)
    submitted.join(timeout=60)
    assert finished[0].token_ids == old_answer and finished[0].weights_version == "base"
    assert later[0].token_ids == new_answer and later[0].weights_version == "v2"


def test_paused_blocks_new_requests_until_it_ends() -> None:
    engine = build_tiny_engine(seed=0)
    done = threading.Event()
    with engine.paused():
        worker = threading.Thread(
            target=lambda: (engine.generate(prompts(engine)[0], SamplingParams(max_tokens=2)), done.set())
        )
        worker.start()
        assert not done.wait(timeout=0.2)
    worker.join(timeout=60)
    assert done.is_set()


def test_a_closed_engine_refuses_new_requests() -> None:
    engine = build_tiny_engine(seed=0)
    engine.generate(prompts(engine)[0], SamplingParams(max_tokens=2))
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        engine.generate(prompts(engine)[0], SamplingParams(max_tokens=2))
