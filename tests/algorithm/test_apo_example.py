"""examples/apo: the topic agent's scoring, the rule-based optimizer reading the prompts APO really sends, and the
whole example script through the Trainer (agent model: the deterministic fake OpenAI server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agentlightning.algorithm.apo.candidates import template_fields
from agentlightning.algorithm.apo.templates import DEFAULT_APPLY_EDIT_TEMPLATES, DEFAULT_GRADIENT_TEMPLATES
from agentlightning.algorithm.apo.types import RolloutResultForAPO
from tests._scripts import load_script

SEED = "What is this text about?\n{text}"


EXAMPLE = Path(__file__).parents[2] / "examples" / "apo"


def _load(name: str) -> ModuleType:
    return load_script(EXAMPLE / f"{name}.py", f"apo_example_{name}")


@pytest.fixture(scope="module")
def scripted() -> ModuleType:
    return _load("scripted_optimizer")


@pytest.fixture(scope="module")
def train_apo() -> ModuleType:
    return _load("train_apo")  # puts examples/apo on sys.path, so runner processes can import the agent


def test_the_dataset_splits_are_balanced_and_disjoint(train_apo: ModuleType) -> None:
    topic_agent = sys.modules["topic_agent"]
    splits = {name: topic_agent.load_split(name) for name in ("train", "val", "test")}
    assert [len(tasks) for tasks in splits.values()] == [24, 16, 24]
    texts = [task["text"] for tasks in splits.values() for task in tasks]
    assert len(set(texts)) == len(texts)
    for tasks in splits.values():
        counts = {label: sum(task["label"] == label for task in tasks) for label in topic_agent.LABELS}
        assert len(set(counts.values())) == 1


@pytest.mark.parametrize(
    ("answer", "label", "reward"),
    [
        ("Sports", "sports", 1.0),
        ("This text is about a sport event, not food.", "sports", 1.0),
        ("It is about food and sports.", "sports", 0.0),
        ("Tech news.", "technology", 1.0),
        ("A natural phenomenon.", "weather", 0.0),
    ],
)
def test_the_first_topic_word_decides_the_reward(train_apo: ModuleType, answer: str, label: str, reward: float) -> None:
    assert sys.modules["topic_agent"].score(answer, label) == reward


def test_the_example_runs_end_to_end_through_the_trainer(
    train_apo: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ..fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as agent_model:
        monkeypatch.setenv("AGENT_BASE_URL", agent_model.base_url)
        monkeypatch.setenv("AGENT_MODEL", "fake-model")
        options = ["--optimizer", "scripted", "--rounds", "1", "--beam-width", "1", "--branch-factor", "2"]
        args = train_apo.parse_args([*options, "--val-batch-size", "4", "--runners", "1", "--out", str(tmp_path)])
        summary = train_apo.run(args)
    assert summary["stats"]["rounds_completed"] == 1 and summary["stats"]["llm_failures"] == 0
    assert summary["val_best"] >= summary["val_seed"] and 0.0 <= summary["test_best"] <= 1.0
    assert "{text}" in summary["best_prompt"] and summary["edit_log"]
    assert json.loads((tmp_path / "summary.json").read_text())["best_prompt"] == summary["best_prompt"]
    assert (tmp_path / "scores.png").stat().st_size > 0


def _run(text: str, label: str, answer: str, reward: float) -> RolloutResultForAPO:
    return RolloutResultForAPO(
        status="succeeded",
        final_reward=reward,
        spans=[],
        messages=[{"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]}],
        input={"text": text, "label": label},
    )


RUNS = [
    _run("The striker scored twice.", "sports", "This text is about a football match.", 0.0),
    _run("Knead the {dough} well.", "food", "Food.", 1.0),
    _run("Rain is expected tomorrow.", "weather", "Sports", 0.0),
]


def test_the_critic_asks_for_the_labels_and_for_examples_of_the_failures(scripted: ModuleType) -> None:
    prompt = DEFAULT_GRADIENT_TEMPLATES[0].render(prompt_template=SEED, experiments=RUNS)[0]["content"]
    critique = scripted.critique(prompt)
    assert critique.splitlines() == [
        "- List the allowed answers (food, sports, weather) and require exactly one of them.",
        '- Add the example: "The striker scored twice." -> sports',
        '- Add the example: "Rain is expected tomorrow." -> weather',
    ]


def test_the_editor_applies_the_critique_and_keeps_the_placeholder(scripted: ModuleType) -> None:
    critique = (
        '- List the allowed answers (food, sports) and require exactly one of them.\n- Add the example: "a {b}" -> food'
    )
    prompt = DEFAULT_APPLY_EDIT_TEMPLATES[0].render(prompt_template=SEED, critique=critique)[0]["content"]
    rewritten = scripted.rewrite(prompt)
    assert rewritten.splitlines() == [
        "Answer with exactly one word from this list: food, sports.",
        "Example: a {{b}} => food",
        "What is this text about?",
        "{text}",
    ]
    assert template_fields(rewritten) == {"text"}
    again = DEFAULT_APPLY_EDIT_TEMPLATES[0].render(prompt_template=rewritten, critique=critique)[0]["content"]
    assert scripted.rewrite(again) == rewritten  # applying the same critique twice changes nothing


def test_the_conservative_rewrite_applies_only_the_first_point(scripted: ModuleType) -> None:
    critique = '- Add the example: "x" -> food\n- Add the example: "y" -> sports'
    prompt = DEFAULT_APPLY_EDIT_TEMPLATES[1].render(prompt_template=SEED, critique=critique)[0]["content"]
    assert scripted.rewrite(prompt).splitlines()[0] == "Example: x => food"
    assert "y => sports" not in scripted.rewrite(prompt)
