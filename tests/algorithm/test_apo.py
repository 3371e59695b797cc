"""APO against a real store, a scripted runner and a scripted OpenAI-compatible optimizer server.

The scripted agent earns reward 1 on a task when the prompt states the rule of the task's category; the scripted
critic names the categories that failed and the scripted editor adds their rules. So a working search climbs from
the seed (score 0) to a prompt holding every rule (score 1).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentlightning import InMemoryLightningStore, PromptTemplate, TracerTraceToTriplet, TraceToMessages
from agentlightning.algorithm import APO as APOFactory
from agentlightning.algorithm.apo import APO, VersionedPromptTemplate

from .scripted import ScriptedOptimizer, ScriptedRunner, category_tasks

SEED = "Task {id} in category {category}."
CATEGORIES = ["red", "green", "blue"]
TRAIN = category_tasks(CATEGORIES, 3, "t")
VAL = category_tasks(CATEGORIES, 2, "v")


def make_apo(optimizer: ScriptedOptimizer, store: Any, **kwargs: Any) -> APO[Any]:
    options: dict[str, Any] = {
        "gradient_model": "critic",
        "apply_edit_model": "editor",
        "beam_width": 2,
        "branch_factor": 2,
        "gradient_batch_size": 3,
        "val_batch_size": 4,
        "beam_rounds": 2,
        "seed": 7,
        "llm_retry_delay": 0.01,
    }
    options.update(kwargs)
    apo = APO(optimizer.client(), **options)
    apo.set_store(store)
    apo.set_initial_resources({"prompt": PromptTemplate(template=SEED, engine="f-string")})
    return apo


async def run_apo(apo: APO[Any], store: Any, train: Any = TRAIN, val: Any = VAL, **runner: Any) -> ScriptedRunner:
    async with ScriptedRunner(store, **runner) as scripted:
        await apo.run(train, val)
    return scripted


# ------------------------------------------------------------------------------------------ construction


def test_the_factory_builds_an_apo_with_the_reference_defaults(optimizer: ScriptedOptimizer) -> None:
    apo = APOFactory(optimizer.client())
    assert isinstance(apo, APO)
    assert (apo.gradient_model, apo.apply_edit_model) == ("gpt-5-mini", "gpt-4.1-mini")
    assert (apo.diversity_temperature, apo.gradient_batch_size, apo.val_batch_size) == (1.0, 4, 16)
    assert (apo.beam_width, apo.branch_factor, apo.beam_rounds) == (4, 4, 3)
    assert apo.rollout_batch_timeout == 3600.0 and apo.run_initial_validation is True
    assert apo.best_score == float("-inf")
    with pytest.raises(ValueError, match="No best prompt yet"):
        apo.get_best_prompt()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beam_width": 0}, "beam_width"),
        ({"branch_factor": -1}, "branch_factor"),
        ({"gradient_batch_size": 0}, "gradient_batch_size"),
        ({"val_batch_size": 1.5}, "val_batch_size"),
        ({"beam_rounds": -1}, "beam_rounds"),
        ({"diversity_temperature": -0.1}, "diversity_temperature"),
        ({"rollout_batch_timeout": 0}, "rollout_batch_timeout"),
        ({"selection": "best"}, "selection"),
        ({"run_id": "has space"}, "run_id"),
        ({"gradient_prompts": ["no placeholders"]}, "gradient_prompts\\[0\\]"),
        ({"apply_edit_prompts": []}, "apply_edit_prompts"),
    ],
)
def test_bad_arguments_are_rejected_by_name(optimizer: ScriptedOptimizer, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        APO(optimizer.client(), **kwargs)


def test_the_client_must_be_an_openai_style_client() -> None:
    with pytest.raises(TypeError, match="AsyncOpenAI"):
        APO(object())  # type: ignore[arg-type]


def test_the_seed_is_the_first_prompt_template_of_the_initial_resources(optimizer: ScriptedOptimizer) -> None:
    apo = APO(optimizer.client())
    with pytest.raises(ValueError, match="initial resources"):
        apo.get_seed_prompt_template()
    apo.set_initial_resources({})
    with pytest.raises(ValueError, match="initial resources"):
        apo.get_seed_prompt_template()
    template = PromptTemplate(template="{q}", engine="f-string")
    apo.set_initial_resources({"main": template})
    assert apo.get_seed_prompt_template() == ("main", template)


def test_apo_reads_conversations_through_trace_to_messages(optimizer: ScriptedOptimizer) -> None:
    apo = APO(optimizer.client())
    assert isinstance(apo.get_adapter(), TraceToMessages)  # a default when none is set
    adapter = TraceToMessages()
    apo.set_adapter(adapter)
    assert apo.get_adapter() is adapter
    triplets = TracerTraceToTriplet()
    apo.set_adapter(triplets)
    with pytest.raises(ValueError, match="TraceToMessages"):
        apo.get_adapter()


def test_the_poml_trace_flag_is_accepted_with_a_warning(
    optimizer: ScriptedOptimizer, caplog: pytest.LogCaptureFixture
) -> None:
    APO(optimizer.client(), _poml_trace=True)
    assert "_poml_trace=True" in caplog.text


# ------------------------------------------------------------------------------------------ the search


async def test_a_run_climbs_from_the_seed_to_the_prompt_with_every_rule(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=3)
    await run_apo(apo, store)
    best = apo.get_best_prompt().template
    assert best.startswith(SEED) and all(f"Rule: {category}." in best for category in CATEGORIES)
    assert apo.best_score == 1.0
    history = apo.get_history()
    assert (history[0].kind, history[0].version, history[0].score) == ("seed", "v0", 0.0)
    leaders = [entry for entry in history if entry.kind == "leader"]
    assert [entry.round for entry in leaders] == [1, 2, 3]
    assert leaders[-1].score == 1.0 and leaders[-1].prompt == best


async def test_the_beam_keeps_at_most_beam_width_prompts_best_first(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store)
    await run_apo(apo, store)
    beam = apo.get_beam()
    assert 1 <= len(beam) <= 2
    scores = [prompt.score for prompt in beam]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    last_round = [entry for entry in apo.get_history() if entry.kind == "candidate" and entry.round == 2]
    assert {entry.version for entry in last_round if entry.selected} == {prompt.version for prompt in beam}


async def test_every_round_publishes_the_best_prompt_as_a_new_resources_version(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=2)
    await run_apo(apo, store)
    latest = await store.get_latest_resources()
    assert latest is not None and latest.resources_id == "apo-best"
    assert latest.version == 3  # after the seed's validation and after each of the two rounds
    assert latest.resources["prompt"] == apo.get_best_prompt()
    for entry in apo.get_history():
        snapshot = await store.get_resources_by_id(f"apo-{entry.version}")
        assert snapshot is not None and snapshot.resources["prompt"].template == entry.prompt  # type: ignore[union-attr]


async def test_candidate_snapshots_keep_the_other_initial_resources(optimizer: ScriptedOptimizer) -> None:
    from agentlightning import LLM

    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=1)
    llm = LLM(endpoint="http://127.0.0.1:1/v1", model="agent-model")
    apo.set_initial_resources({"llm": llm, "prompt": PromptTemplate(template=SEED, engine="f-string")})
    await run_apo(apo, store)
    for rollout in await store.query_rollouts():
        if rollout.resources_id and rollout.resources_id.startswith("apo-v"):
            snapshot = await store.get_resources_by_id(rollout.resources_id)
            assert snapshot is not None and snapshot.resources["llm"] == llm


async def test_without_resampling_no_prompt_task_pair_is_rolled_out_twice(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=3, resample_scores=False)
    scripted = await run_apo(apo, store)
    assert max(scripted.seen.values()) == 1
    assert apo.stats.rollouts_reused > 0
    assert apo.stats.rollouts_enqueued == sum(scripted.seen.values()) == len(await store.query_rollouts()) - 1


def _lucky_first(counts: dict[Any, int]) -> Any:
    """An agent that samples: reward 1 the first time a (prompt, task) pair runs, 0 every later time."""

    def reward(rendered: str, task: dict[str, Any]) -> float:
        key = (rendered, task["id"])
        counts[key] = counts.get(key, 0) + 1
        return 1.0 if counts[key] == 1 else 0.0

    return reward


async def test_a_sampling_agents_lucky_first_score_is_sampled_again_in_later_rounds(
    optimizer: ScriptedOptimizer,
) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=1)
    counts: dict[Any, int] = {}
    scripted = await run_apo(apo, store, reward_fn=_lucky_first(counts))
    seed_entry, *_ = apo.get_history()
    (leader,) = [entry for entry in apo.get_history() if entry.kind == "leader"]
    assert seed_entry.score == 1.0  # every first sample is lucky
    assert leader.version == "v0" and leader.score == 0.5  # re-sampled in round 1: the mean of 1 and 0 per task
    assert max(scripted.seen.values()) == 2  # once per round at most


async def test_within_a_round_a_pair_is_rolled_out_once(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=2)
    scripted = await run_apo(apo, store)
    rounds: dict[Any, list[int]] = {}
    for rollout in await store.query_rollouts():
        meta = (rollout.metadata or {}).get("apo")
        if isinstance(meta, dict):
            rounds.setdefault((meta["prompt_key"], meta["task_key"]), []).append(meta["round"])
    assert all(len(found) == len(set(found)) for found in rounds.values())
    assert max(scripted.seen.values()) <= 3  # the seed's validation, then once in each of the two rounds


async def test_a_stopped_llm_proxy_given_to_the_trainer_runs_during_the_run(optimizer: ScriptedOptimizer) -> None:
    from agentlightning import LLMProxy

    store = InMemoryLightningStore()
    proxy = LLMProxy(model_list=[], store=store)
    apo = make_apo(optimizer, store, beam_rounds=0)
    apo.set_llm_proxy(proxy)
    running: list[bool] = []
    await run_apo(apo, store, on_claim=lambda _: running.append(proxy.is_running()))
    assert running and all(running)
    assert not proxy.is_running()  # stopped again: it was not running before


async def test_the_rollouts_of_a_phase_are_enqueued_together(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=1, val_batch_size=6)
    scripted = await run_apo(apo, store, workers=2)
    # The seed's 6 validation rollouts were all waiting when the first one was claimed, and so on per phase.
    assert scripted.max_waiting >= 6
    phases = {
        (r.metadata or {})["apo"]["phase"] for r in await store.query_rollouts() if r.metadata and "apo" in r.metadata
    }
    assert {"seed", "gradient", "val"} <= phases


async def test_a_seeded_run_is_reproducible(optimizer: ScriptedOptimizer) -> None:
    histories = []
    for _ in range(2):
        store = InMemoryLightningStore()
        apo = make_apo(optimizer, store, seed=11)
        await run_apo(apo, store)
        histories.append(apo.get_history())
    assert histories[0] == histories[1]


async def test_pareto_selection_keeps_every_prompt_that_wins_a_task(optimizer: ScriptedOptimizer) -> None:
    # Critiques that see one run each give prompts with one rule each; scored on the whole validation set, each is
    # best on its own category and none dominates another, while the seed wins nothing.
    kwargs: dict[str, Any] = {"beam_rounds": 1, "beam_width": 4, "branch_factor": 3, "val_batch_size": 99}
    beams = {}
    for selection in ("beam", "pareto"):
        store = InMemoryLightningStore()
        apo = make_apo(optimizer, store, selection=selection, seed=3, gradient_batch_size=1, **kwargs)
        await run_apo(apo, store)
        beams[selection] = {prompt.prompt_template.template.replace(SEED, "").strip() for prompt in apo.get_beam()}
    assert beams["pareto"] == {"Rule: red.", "Rule: green.", "Rule: blue."}
    assert beams["beam"] == beams["pareto"] | {""}  # the mean-score beam fills its last place with the seed


async def test_zero_rounds_with_initial_validation_only_scores_the_seed(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=0)
    await run_apo(apo, store)
    rollouts = [r for r in await store.query_rollouts() if r.mode is not None]
    assert len(rollouts) == len(VAL) and {r.mode for r in rollouts} == {"val"}
    assert apo.best_score == 0.0 and apo.get_best_prompt().template == SEED
    assert optimizer.calls("critic") == optimizer.calls("critic")  # no optimizer traffic needed


async def test_without_initial_validation_the_seed_is_scored_only_in_rounds(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=0, run_initial_validation=False)
    await run_apo(apo, store)
    assert [r for r in await store.query_rollouts() if r.mode is not None] == []
    assert apo.get_best_prompt().template == SEED and apo.best_score == float("-inf")
    assert apo.get_history()[0].score is None


# ------------------------------------------------------------------------------------------ the building blocks


async def test_evaluate_prompt_on_batch_publishes_enqueues_and_averages(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store)
    prompt = VersionedPromptTemplate("v9", PromptTemplate(template=SEED + "\nRule: red.", engine="f-string"))
    tasks = category_tasks(["red", "blue"], 1, "x")
    async with ScriptedRunner(store):
        results, score = await apo.evaluate_prompt_on_batch(prompt, "prompt", tasks, "train")
    assert score == 0.5
    assert [result["final_reward"] for result in results] == [1.0, 0.0]
    assert {result["status"] for result in results} == {"succeeded"}
    rollouts = await store.query_rollouts()
    assert [(r.mode, r.resources_id) for r in rollouts] == [("train", "apo-v9")] * 2
    snapshot = await store.get_resources_by_id("apo-v9")
    assert snapshot is not None and snapshot.version == 1


async def test_rollout_results_carry_status_reward_spans_and_messages(optimizer: ScriptedOptimizer) -> None:
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store)
    prompt = VersionedPromptTemplate("v1", PromptTemplate(template=SEED, engine="f-string"))
    async with ScriptedRunner(store):
        await apo.evaluate_prompt_on_batch(prompt, "prompt", category_tasks(["red"], 1, "x"), "val")
    (result,) = await apo.get_rollout_results(list(await store.query_rollouts()))
    assert result["status"] == "succeeded" and result["final_reward"] == 0.0
    assert [span["name"] for span in result["spans"]] == ["openai.chat.completion", "agentlightning.reward"]
    assert result["messages"][0]["messages"][0] == {"role": "user", "content": "Task x-red-0 in category red."}
    assert result["input"] == {"id": "x-red-0", "category": "red"}


def _results(rewards: list[float]) -> list[Any]:
    return [
        {
            "status": "succeeded",
            "final_reward": reward,
            "spans": [],
            "messages": [],
            "input": {"id": f"r{index}", "category": "red"},
        }
        for index, reward in enumerate(rewards)
    ]


async def test_the_critique_shows_gradient_batch_size_runs_at_the_configured_temperature(
    optimizer: ScriptedOptimizer,
) -> None:
    apo = make_apo(optimizer, InMemoryLightningStore(), diversity_temperature=0.7, gradient_batch_size=4)
    prompt = VersionedPromptTemplate("v0", PromptTemplate(template=SEED, engine="f-string"))
    before = len(optimizer.requests)
    critique = await apo.compute_textual_gradient(prompt, _results([0.0] * 6))
    assert critique == "- add the rule for category red"
    await apo.compute_textual_gradient(prompt, _results([0.0] * 2))
    first, second = optimizer.requests[before:]
    assert (first["model"], first["temperature"]) == ("critic", 0.7)
    assert [len(request["messages"]) for request in (first, second)] == [1, 1]
    assert first["messages"][0]["role"] == "user"
    assert first["messages"][0]["content"].count("### Run ") == 4
    assert second["messages"][0]["content"].count("### Run ") == 2


async def test_gradient_then_edit_returns_the_rewritten_template(optimizer: ScriptedOptimizer) -> None:
    apo = make_apo(optimizer, InMemoryLightningStore())
    prompt = VersionedPromptTemplate("v0", PromptTemplate(template=SEED, engine="f-string"))
    before = len(optimizer.requests)
    text = await apo.textual_gradient_and_apply_edit(prompt, _results([0.0, 1.0]))
    assert text == SEED + "\nRule: red."
    critique_request, edit_request = optimizer.requests[before:]
    assert (critique_request["model"], edit_request["model"]) == ("critic", "editor")
    assert SEED in edit_request["messages"][0]["content"]
    assert "- add the rule for category red" in edit_request["messages"][0]["content"]


async def test_an_empty_critique_returns_the_old_template_after_one_call(optimizer: ScriptedOptimizer) -> None:
    apo = make_apo(optimizer, InMemoryLightningStore(), gradient_model="empty-critic")
    prompt = VersionedPromptTemplate("v0", PromptTemplate(template=SEED, engine="f-string"))
    before = len(optimizer.requests)
    assert await apo.textual_gradient_and_apply_edit(prompt, _results([0.0])) == SEED
    assert len(optimizer.requests) == before + 1


async def test_run_logs_a_summary(optimizer: ScriptedOptimizer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentlightning.algorithm")
    store = InMemoryLightningStore()
    await run_apo(make_apo(optimizer, store, beam_rounds=1), store)
    assert "APO round 1/1:" in caplog.text and "APO run 'apo' done after 1 rounds" in caplog.text


# ------------------------------------------------------------------------------------------ experiment tracking


async def test_a_tracked_run_records_its_settings_and_each_rounds_scores(
    optimizer: ScriptedOptimizer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.chdir(tmp_path)  # local tracking files go under runs/<run_id>/
    store = InMemoryLightningStore()
    apo = make_apo(optimizer, store, beam_rounds=3, tracking="tensorboard", run_id="rules")
    await run_apo(apo, store)
    events = EventAccumulator(str(tmp_path / "runs" / "rules" / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    best = [(event.step, event.value) for event in events.Scalars("best_score")]
    assert [step for step, _ in best] == [0, 1, 2, 3]
    assert best[0][1] == 0.0 and best[-1][1] == 1.0
    scored = [
        sum(1 for e in apo.get_history() if e.round == r and e.kind == "candidate" and e.score is not None)
        for r in (1, 2, 3)
    ]
    assert [event.value for event in events.Scalars("candidates/scored")][1:] == scored and min(scored) > 0
    assert events.Scalars("optimizer/calls")[-1].value == apo.stats.llm_calls
    assert "params" in events.Tags()["tensors"]
