"""A topic classifier agent written with the plain OpenAI SDK, whose accuracy depends on its prompt.

The agent fills the prompt template with a short text, asks the model for the topic, and earns reward 1 when the
first topic word in the answer is the text's label (sports, food, technology or weather), else 0. A vague prompt
("What is this text about?") lets a small model ramble without ever naming a topic word; a prompt that lists the
labels and asks for one word does much better. That is what APO has to discover.

The dataset (`data/topics_{train,val,test}.jsonl`, 24/16/24 texts, balanced over the four labels) was written for
this example. APO critiques with the training split, scores with the validation split; the test split is only read
at the end, to report the held-out accuracy of the seed and of the best prompt.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

import agentlightning as agl

LABELS = ("sports", "food", "technology", "weather")
SEED_PROMPT = "What is this text about?\n{text}"
DATA_DIR = Path(__file__).parent / "data"

_LABEL_PATTERNS = {
    "sports": re.compile(r"\bsports?\b"),
    "food": re.compile(r"\bfood\b"),
    "technology": re.compile(r"\btech(?:nology)?\b"),
    "weather": re.compile(r"\bweather\b"),
}


def load_split(name: str) -> list[dict[str, str]]:
    """The tasks of one split ("train", "val" or "test"): dicts with "text" and "label"."""
    path = DATA_DIR / f"topics_{name}.jsonl"
    tasks = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for index, task in enumerate(tasks):
        if set(task) != {"text", "label"} or task["label"] not in LABELS:
            raise ValueError(f"{path}:{index + 1} is not a {{text, label}} task with a known label: {task!r}")
    return tasks


def parse_label(answer: str) -> Optional[str]:
    """The topic word that appears first in the answer (None when it names none)."""
    text = answer.lower()
    found = [(match.start(), label) for label, pattern in _LABEL_PATTERNS.items() if (match := pattern.search(text))]
    return min(found)[1] if found else None


def score(answer: str, label: str) -> float:
    return 1.0 if parse_label(answer) == label else 0.0


async def classify(llm: agl.LLM, prompt_template: agl.PromptTemplate, text: str) -> str:
    """Ask the model for the topic of `text` with the given prompt; returns the answer's text."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "unused", max_retries=2, timeout=600)
    try:
        options: dict[str, Any] = {"max_tokens": 12, "temperature": 0.0}
        options.update(llm.sampling_parameters)
        response = await client.chat.completions.create(
            model=llm.model,
            messages=[{"role": "user", "content": prompt_template.format(text=text)}],
            **options,
        )
    finally:
        await client.close()
    return response.choices[0].message.content or ""


@agl.rollout
async def topic_agent(task: dict[str, str], llm: agl.LLM, prompt_template: agl.PromptTemplate) -> float:
    """One rollout: classify the task's text; the returned float is the reward."""
    answer = await classify(llm, prompt_template, task["text"])
    return score(answer, task["label"])
