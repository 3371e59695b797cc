"""APO under bad input and failures: a down or junk optimizer, an agent without rewards, runners that never come,
malformed datasets and templates, and a run stopped in the middle that resumes from the store."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from agentlightning import InMemoryLightningStore, PromptTemplate, store_from_url

from .scripted import ScriptedOptimizer, ScriptedRunner
from .test_apo import SEED, TRAIN, VAL, make_apo, run_apo


async def test_an_optimizer_that_is_down_costs_retries_not_the_run(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, gradient_model="down", llm_max_retries=2)
    await run_apo(apo, store)
    calls = 2 * 2 * 2  # rounds x parents x branches
    assert apo.stats.skipped == {"critique_failed": calls}
    assert (apo.stats.llm_failures, apo.stats.llm_retries, apo.stats.llm_calls) == (calls, 2 * calls, 3 * calls)
    assert apo.get_best_prompt().template == SEED and apo.best_score == 0.0
    assert apo.stats.rounds_completed == 2


async def test_a_flaky_optimizer_is_retried_until_it_answers() -> None:
    flaky = ScriptedOptimizer(flaky_failures=2).start()
    try:
        store = InMemoryLightningStore()
        apo = make_apo(flaky, store, gradient_model="flaky-critic", beam_rounds=1, max_concurrent_llm_calls=1)
        await run_apo(apo, store)
    finally:
        flaky.stop()
    assert apo.stats.llm_retries == 2 and apo.stats.llm_failures == 0
    assert "critique_failed" not in apo.stats.skipped
    assert apo.best_score > 0.0


async def test_a_wrong_model_name_is_not_retried(
    optimizer: ScriptedOptimizer, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, gradient_model="no-such-model", beam_rounds=1)
    await run_apo(apo, store)
    assert apo.stats.llm_retries == 0 and apo.stats.llm_failures == 4
    assert "HTTP 404" in caplog.text and "not retryable" in caplog.text


async def test_junk_rewrites_are_skipped_and_counted(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, apply_edit_model="junk-editor")
    await run_apo(apo, store)
    assert apo.stats.skipped == {"lost_placeholders": 8}
    assert apo.stats.candidates_accepted == 0
    log = apo.get_edit_log()
    assert len(log) == 8 and {entry["verdict"] for entry in log} == {"lost_placeholders"}
    assert log[0]["rewrite"] == "I think the template is fine as it is." and log[0]["critique"].startswith("- ")
    assert [prompt.version for prompt in apo.get_beam()] == ["v0"]


async def test_empty_critiques_are_skipped_and_counted(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, gradient_model="empty-critic", beam_rounds=1)
    await run_apo(apo, store)
    assert apo.stats.skipped == {"empty_critique": 4}


async def test_an_agent_that_never_emits_a_reward_keeps_the_seed(
    optimizer: ScriptedOptimizer, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store)
    await run_apo(apo, store, reward_fn=lambda rendered, task: None)
    assert "have no reward (counted as 0)" in caplog.text
    assert apo.stats.rollouts_without_reward == apo.stats.rollouts_enqueued > 0
    # All prompts score 0: the beam keeps its incumbent first and the best prompt is still the seed.
    assert apo.get_best_prompt().template == SEED and apo.best_score == 0.0
    assert apo.get_beam()[0].version == "v0"


async def test_rollouts_that_never_finish_are_cancelled_after_the_timeout(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=1, rollout_batch_timeout=0.2)
    await apo.run(TRAIN, VAL)  # no runner at all
    statuses = {rollout.status for rollout in await store.query_rollouts() if rollout.mode is not None}
    assert statuses == {"cancelled"}
    assert apo.stats.rollouts_unfinished == apo.stats.rollouts_enqueued
    assert apo.get_best_prompt().template == SEED and apo.best_score == float("-inf")


@pytest.mark.parametrize(
    ("train", "val", "message"),
    [
        (None, VAL, "needs a train_dataset"),
        (TRAIN, None, "needs a val_dataset"),
        ([], VAL, "non-empty train_dataset"),
        (TRAIN, 5, "val_dataset must be indexable"),
    ],
)
async def test_missing_or_malformed_datasets_are_named(
    optimizer: ScriptedOptimizer, train: Any, val: Any, message: str
) -> None:
    apo = make_apo(optimizer, InMemoryLightningStore())
    with pytest.raises(ValueError, match=message):
        await apo.run(train, val)


async def test_a_malformed_seed_template_is_rejected_before_any_rollout(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store)
    apo.set_initial_resources({"prompt": PromptTemplate(template="Task {id", engine="f-string")})
    with pytest.raises(ValueError, match="seed prompt template is not a valid f-string"):
        await apo.run(TRAIN, VAL)
    assert len(await store.query_rollouts()) == 0


async def test_seed_placeholders_the_tasks_lack_are_warned_about(
    optimizer: ScriptedOptimizer, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=0, run_initial_validation=False)
    apo.set_initial_resources({"prompt": PromptTemplate(template="Task {question}", engine="f-string")})
    await apo.run(TRAIN, VAL)
    assert "placeholders ['question'] are not keys of every task" in caplog.text


# ------------------------------------------------------------------------------------------ resumption


def _stop_in_round(task: asyncio.Task[Any], round_num: int) -> Any:
    """A runner callback that cancels the APO task (as a killed process would stop) when it claims the first rollout
    of `round_num`."""

    def on_claim(rollout: Any) -> None:
        if (rollout.metadata or {}).get("apo", {}).get("round") == round_num:
            task.cancel()

    return on_claim


async def test_a_stopped_run_resumes_from_its_last_completed_round(
    optimizer: ScriptedOptimizer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.algorithm")
    reference_store = InMemoryLightningStore()
    reference = make_apo(optimizer, reference_store, beam_rounds=3, seed=5)
    reference_seen = (await run_apo(reference, reference_store)).seen

    url = f"sqlite:///{tmp_path / 'apo.db'}"
    first_life = store_from_url(url)
    seen: dict[Any, int] = {}
    interrupted = asyncio.create_task(make_apo(optimizer, first_life, beam_rounds=3, seed=5).run(TRAIN, VAL))
    async with ScriptedRunner(first_life, on_claim=_stop_in_round(interrupted, 2)) as runner:
        with pytest.raises(asyncio.CancelledError):
            await interrupted
    seen.update(runner.seen)
    await first_life.close()

    second_life = store_from_url(url)
    resumed = make_apo(optimizer, second_life, beam_rounds=3, seed=None)  # the seed comes from the checkpoint
    async with ScriptedRunner(second_life) as runner:
        await resumed.run(TRAIN, VAL)
    for pair, count in runner.seen.items():
        seen[pair] = seen.get(pair, 0) + count
    await second_life.close()

    assert "Resuming APO run 'apo' after round 1 of 3" in caplog.text
    assert resumed.get_history() == reference.get_history()
    assert resumed.get_best_prompt() == reference.get_best_prompt()
    assert seen == reference_seen  # the two lives rolled out exactly what one uninterrupted run does


async def test_a_finished_run_is_not_repeated(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    await run_apo(make_apo(optimizer, store, beam_rounds=1), store)
    rollouts = len(await store.query_rollouts())
    again = make_apo(optimizer, store, beam_rounds=1)
    await again.run(TRAIN, VAL)  # no runner needed: nothing is left to do
    assert len(await store.query_rollouts()) == rollouts
    assert again.stats.rounds_completed == 1 and again.get_best_prompt() is not None


async def test_more_rounds_continue_a_finished_run(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    await run_apo(make_apo(optimizer, store, beam_rounds=1), store)
    longer = make_apo(optimizer, store, beam_rounds=2)
    await run_apo(longer, store)
    assert [entry.round for entry in longer.get_history() if entry.kind == "leader"] == [1, 2]


async def test_resuming_with_other_datasets_is_refused(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    await run_apo(make_apo(optimizer, store, beam_rounds=0), store)
    with pytest.raises(ValueError, match="another seed prompt, other datasets"):
        await make_apo(optimizer, store).run(TRAIN[:3], VAL)


def _with_llm(apo: Any, model: str, endpoint: str = "http://127.0.0.1:1/v1", temperature: float = 0.0) -> Any:
    from agentlightning import LLM

    llm = LLM(endpoint=endpoint, model=model, sampling_parameters={"temperature": temperature})
    apo.set_initial_resources({"llm": llm, "prompt": PromptTemplate(template=SEED, engine="f-string")})
    return apo


async def test_resuming_with_another_model_is_refused(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    await run_apo(_with_llm(make_apo(optimizer, store, beam_rounds=0), "model-a"), store)
    with pytest.raises(ValueError, match="other resources"):
        await _with_llm(make_apo(optimizer, store, beam_rounds=0), "model-b").run(TRAIN, VAL)
    with pytest.raises(ValueError, match="other resources"):
        await _with_llm(make_apo(optimizer, store, beam_rounds=0), "model-a", temperature=1.0).run(TRAIN, VAL)


async def test_resuming_with_the_same_model_on_another_port_continues(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    await run_apo(_with_llm(make_apo(optimizer, store, beam_rounds=0), "model-a"), store)
    again = _with_llm(make_apo(optimizer, store, beam_rounds=0), "model-a", endpoint="http://127.0.0.1:2/v1")
    await again.run(TRAIN, VAL)  # no runner needed: the finished run is found and not repeated
    assert again.get_history()[0].kind == "seed"


async def test_resume_false_starts_afresh(optimizer: ScriptedOptimizer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.algorithm")
    store = InMemoryLightningStore()
    await run_apo(make_apo(optimizer, store, beam_rounds=0), store)
    fresh = make_apo(optimizer, store, beam_rounds=0, resume=False)
    await run_apo(fresh, store, train=TRAIN[:3])
    assert "Resuming" not in caplog.text
    assert fresh.stats.rollouts_enqueued == len(VAL)  # a new session: nothing reused from the old one
    records = [r for r in await store.query_rollouts() if r.input == {"apo_checkpoint": "apo"}]
    assert len(records) == 1  # the run's one checkpoint record was overwritten


async def test_rollouts_without_any_captured_llm_call_stop_the_run(optimizer: ScriptedOptimizer) -> None:
    from agentlightning.algorithm import NoLLMCallsError

    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store)
    critiques = optimizer.calls("critic")
    with pytest.raises(NoLLMCallsError, match="round 0 seed"):
        await run_apo(apo, store, llm_span=False)
    assert optimizer.calls("critic") == critiques  # no critique of empty conversations was asked for
