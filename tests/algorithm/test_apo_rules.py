"""APO's pure rules: reading rewrites, judging candidates, selecting the beam, rendering prompts, checkpoint JSON."""

from __future__ import annotations

import random

import pytest

from agentlightning import PromptTemplate
from agentlightning.algorithm.apo.candidates import (
    check_candidate,
    clean_rewrite,
    content_key,
    fillable_fields,
    template_fields,
)
from agentlightning.algorithm.apo.checkpoint import APOCheckpoint
from agentlightning.algorithm.apo.selection import sample_parents, select_by_mean, select_pareto
from agentlightning.algorithm.apo.state import SearchState
from agentlightning.algorithm.apo.templates import (
    DEFAULT_APPLY_EDIT_TEMPLATES,
    DEFAULT_GRADIENT_TEMPLATES,
    MAX_TEXT_CHARS,
    MetaPrompt,
    render_experiments,
    render_span_experiments,
)
from agentlightning.algorithm.apo.types import APOHistoryEntry, APOStats, RolloutResultForAPO

# ------------------------------------------------------------------------------------------------ candidates


def test_template_fields_reads_names_and_roots_of_attribute_access() -> None:
    assert template_fields("Hi {name}, {task.id} {{literal}} {items[0]}") == {"name", "task", "items"}
    assert template_fields("{{ question }} and {{answer}}", "jinja") == {"question", "answer"}


@pytest.mark.parametrize("text", ["Unbalanced {brace", "Positional {}", "Indexed {0}"])
def test_template_fields_rejects_malformed_f_strings(text: str) -> None:
    with pytest.raises(ValueError):
        template_fields(text)


def test_fillable_fields_adds_keys_every_task_has() -> None:
    tasks = [{"q": 1, "a": 2, "x": 3}, {"q": 4, "a": 5}]
    assert fillable_fields({"q"}, tasks) == {"q", "a"}
    assert fillable_fields({"q"}, ["plain string task"]) == {"q"}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Solve {q} carefully.", "Solve {q} carefully."),
        ("Here is the improved prompt:\nSolve {q} carefully.", "Solve {q} carefully."),
        ("Sure! Revised template:\n```\nSolve {q}.\n```\nThis is better because...", "Solve {q}."),
        ('"Solve {q} now."', "Solve {q} now."),
        ("   ", ""),
        (None, ""),
    ],
)
def test_clean_rewrite_extracts_the_template(answer: str, expected: str) -> None:
    assert clean_rewrite(answer) == expected


def test_clean_rewrite_keeps_a_template_whose_first_line_ends_with_a_colon() -> None:
    assert clean_rewrite("Question:\n{q}\nAnswer:") == "Question:\n{q}\nAnswer:"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty_rewrite"),
        ("Solve {q}.", "unchanged"),
        ("Solve it.", "lost_placeholders"),
        ("Solve {q} for {user}.", "unknown_placeholders"),
        ("Solve {q", "malformed_template"),
        ("Solve {q}." + "x" * 100, "too_long"),
        ("Solve {q} step by step, answer with a number.", None),
        ("Solve {q}; the answer key is {a}.", None),
    ],
)
def test_check_candidate_names_why_a_rewrite_is_junk(text: str, reason: str) -> None:
    verdict = check_candidate(
        text,
        engine="f-string",
        required_fields={"q"},
        allowed_fields={"q", "a"},
        parent_text="Solve {q}.",
        max_chars=80,
    )
    assert verdict == reason


def test_content_key_is_stable_and_order_insensitive_for_dicts() -> None:
    assert content_key({"a": 1, "b": [1, 2]}) == content_key({"b": [1, 2], "a": 1})
    assert content_key({"a": 1}) != content_key({"a": 2})


# ------------------------------------------------------------------------------------------------ selection


def test_sample_parents_repeats_a_small_beam_without_randomness() -> None:
    class NoRandom(random.Random):
        def sample(self, *args: object, **kwargs: object) -> list[int]:  # type: ignore[override]
            raise AssertionError("no sampling expected")

    assert sample_parents(["a", "b"], 5, NoRandom()) == [(0, "a"), (1, "b"), (0, "a"), (1, "b"), (0, "a")]


def test_sample_parents_draws_distinct_members_from_a_full_beam() -> None:
    parents = sample_parents(["a", "b", "c", "d"], 2, random.Random(4))
    assert len({index for index, _ in parents}) == 2
    assert all(["a", "b", "c", "d"][index] == prompt for index, prompt in parents)


def test_select_by_mean_keeps_the_best_and_breaks_ties_by_position() -> None:
    assert select_by_mean([0.5, 0.9, None, 0.9, 0.1], 3) == [1, 3, 0]
    assert select_by_mean([0.0, 0.0, 0.0], 2) == [0, 1]  # all equal: the incumbents stay
    assert select_by_mean([None, 0.0], 2) == [1, 0]


def test_select_pareto_keeps_every_prompt_that_wins_a_task() -> None:
    per_task = [
        {"t1": 1.0, "t2": 0.0, "t3": 0.0},  # wins t1
        {"t1": 0.0, "t2": 1.0, "t3": 0.0},  # wins t2
        {"t1": 0.5, "t2": 0.5, "t3": 0.5},  # wins t3, best mean
        {"t1": 0.0, "t2": 0.0, "t3": 0.0},  # wins nothing
    ]
    scores = [1 / 3, 1 / 3, 0.5, 0.0]
    assert select_pareto(per_task, scores, 4) == [2, 0, 1]
    assert select_pareto(per_task, scores, 2) == [2, 0]


def test_select_pareto_drops_dominated_winners() -> None:
    per_task = [{"t1": 1.0, "t2": 0.0}, {"t1": 1.0, "t2": 1.0}]
    assert select_pareto(per_task, [0.5, 1.0], 4) == [1]


def test_select_pareto_with_no_results_falls_back_to_the_mean() -> None:
    assert select_pareto([{}, {}], [0.1, 0.2], 1) == [1]


# ------------------------------------------------------------------------------------------------ templates

RESULT = RolloutResultForAPO(
    status="succeeded",
    final_reward=0.0,
    spans=[{"name": "openai.chat.completion", "attributes": {"gen_ai.prompt.0.content": "hi " * 400}}],
    messages=[{"messages": [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}], "tools": None}],
    input={"q": "Q1"},
)


def test_the_packaged_templates_load_and_take_the_right_placeholders() -> None:
    assert len(DEFAULT_GRADIENT_TEMPLATES) == 3 and len(DEFAULT_APPLY_EDIT_TEMPLATES) == 2
    for template in DEFAULT_GRADIENT_TEMPLATES:
        assert "prompt_template" in template.placeholders
    for template in DEFAULT_APPLY_EDIT_TEMPLATES:
        assert {"prompt_template", "critique"} <= template.placeholders


def test_a_critique_prompt_is_one_user_message_with_template_and_runs() -> None:
    (message,) = DEFAULT_GRADIENT_TEMPLATES[0].render(prompt_template="Solve {q}.", experiments=[RESULT])
    assert message["role"] == "user"
    assert message["content"].startswith("Your job is to find out why a prompt template made an AI agent fail")
    assert "Solve {q}." in message["content"]
    assert "Reward: 0.0" in message["content"] and "[user] Q1" in message["content"]
    assert 'Task: {"q": "Q1"}' in message["content"]


def test_a_rewrite_prompt_carries_the_template_and_the_critique() -> None:
    (message,) = DEFAULT_APPLY_EDIT_TEMPLATES[0].render(prompt_template="Solve {q}.", critique="- be terse")
    assert "Solve {q}." in message["content"] and "- be terse" in message["content"]


def test_rendered_runs_are_bounded_in_size() -> None:
    long = RolloutResultForAPO(
        status="failed",
        final_reward=None,
        spans=[{"name": f"s{i}", "attributes": {"x": "y" * 1000}} for i in range(100)],
        messages=[{"messages": [{"role": "user", "content": "z" * 10_000}] * 50}],
    )
    assert len(render_experiments([long])) < 8000
    assert len(render_span_experiments([long])) < 8000
    assert "more characters]" in render_experiments([long])
    assert "Reward: none recorded" in render_experiments([long])
    assert MAX_TEXT_CHARS < 10_000


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("no placeholders", "gradient", "must contain \\$prompt_template"),
        ("$prompt_template only", "gradient", "\\$experiments or \\$span_experiments"),
        ("$prompt_template $experiments $whatever", "gradient", "unknown placeholders \\['whatever'\\]"),
        ("$prompt_template", "apply_edit", "must contain \\$critique"),
        ("$prompt_template $critique costs 5$", "apply_edit", "invalid '\\$'"),
    ],
)
def test_custom_templates_are_checked_when_built(text: str, kind: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MetaPrompt("custom", text, kind)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ state


def test_a_search_state_survives_a_checkpoint_round_trip() -> None:
    stats = APOStats(rounds_completed=2, rollouts_enqueued=10, skipped={"duplicate": 1})
    state = SearchState(seed=5, stats=stats)
    seed = state.new_version(PromptTemplate(template="A {q}", engine="f-string"), 0.5)
    child = state.new_version(PromptTemplate(template="B {q}", engine="f-string"), 0.75)
    state.beam = [child, seed]
    state.set_best(child, 0.7)
    state.history = [APOHistoryEntry(0, "v0", "A {q}", 0.5, "seed", True)]
    state.batches_drawn["val"] = 3
    state.rng.random()
    checkpoint = APOCheckpoint.from_json(state.to_checkpoint("run", "fp").to_json())
    prompts = {"v0": seed.prompt_template, "v1": child.prompt_template}
    restored_stats = APOStats()
    restored = SearchState.from_checkpoint(checkpoint, prompts, restored_stats)
    assert [(p.version, p.score) for p in restored.beam] == [("v1", 0.75), ("v0", 0.5)]
    assert restored.best is not None and (restored.best.version, restored.best_score) == ("v1", 0.7)
    assert restored.version_counter == 2 and restored.batches_drawn == {"gradient": 0, "val": 3}
    assert restored.history == state.history and restored.session == state.session
    assert restored_stats.skipped == {"duplicate": 1} and restored_stats.rounds_completed == 2
    assert restored.rng.random() == state.rng.random()


def test_a_checkpoint_of_another_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported APO checkpoint format"):
        APOCheckpoint.from_json({"format": 99})
