"""The example's rule-based optimizer reads the prompts APO really sends (rendered by APO's own templates)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agentlightning.algorithm.apo.candidates import template_fields
from agentlightning.algorithm.apo.templates import DEFAULT_APPLY_EDIT_TEMPLATES, DEFAULT_GRADIENT_TEMPLATES
from agentlightning.algorithm.apo.types import RolloutResultForAPO

SEED = "What is this text about?\n{text}"


@pytest.fixture(scope="module")
def scripted() -> ModuleType:
    path = Path(__file__).parents[2] / "examples" / "apo" / "scripted_optimizer.py"
    spec = importlib.util.spec_from_file_location("apo_example_scripted_optimizer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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
