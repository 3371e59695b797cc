"""A rule-based stand-in for APO's optimizer model, served as an OpenAI-compatible endpoint.

Use it when no capable optimizer model is at hand (SmolLM2-135M cannot write usable critiques; see
docs/benchmarks.md): the search, the selection by validation score, the cache and the publishing then run for real
against the real agent model, and only the critic and the editor are scripted. They see exactly what an optimizer
model would see (the critique and rewrite prompts that APO sends, built from training runs only) and act as a
methodical prompt engineer for classification tasks whose tasks carry a "label":

- critic: when a failed run's answer names no known label, asks to list the labels seen in the runs and to require
  one of them as the answer; for every failed run, asks to add that run's text with its label as an example.
- editor: applies the critique by managing two kinds of lines at the top of the template — one line listing the
  allowed answers (merged with the labels already listed) and up to four "Example:" lines (newest kept) — and keeps
  the rest of the template as it is. The conservative rewrite prompt ("one careful improvement") applies only the
  critique's first point.

Run standalone: `python examples/apo/scripted_optimizer.py --port 8123` (loopback only).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, Optional

_RUN = re.compile(r"### Run \d+\n(.*?)(?=\n### Run |\Z)", re.DOTALL)
_FENCED = re.compile(r"```\n(.*?)\n```", re.DOTALL)
_LABELS_LINE = "Answer with exactly one word from this list:"
_EXAMPLE = "Example:"
MAX_EXAMPLES = 4


def _label_in(answer: str, labels: set[str]) -> Optional[str]:
    lowered = answer.lower()
    positions = [(lowered.find(label), label) for label in labels if label in lowered]
    return min(positions)[1] if positions else None


def critique(prompt: str) -> str:
    """Bullets about the failed runs shown in an APO critique prompt."""
    runs: list[tuple[dict[str, Any], float, str]] = []
    for block in _RUN.findall(prompt):
        task_match = re.search(r"^Task: (\{.*\})$", block, re.MULTILINE)
        reward_match = re.search(r"^Reward: (\S+)", block, re.MULTILINE)
        answers = re.findall(r"^\s*\[assistant\] (.*)$", block, re.MULTILINE)
        if task_match is None:
            continue
        try:
            task = json.loads(task_match.group(1))
        except ValueError:
            continue
        reward = float(reward_match.group(1)) if reward_match and reward_match.group(1) != "none" else 0.0
        runs.append((task, reward, answers[-1] if answers else ""))
    labels = {str(task.get("label")) for task, _, _ in runs if task.get("label")}
    bullets: list[str] = []
    failed = [(task, answer) for task, reward, answer in runs if reward < 1.0 and task.get("label")]
    if any(_label_in(answer, labels) is None for _, answer in failed):
        bullets.append(f"- List the allowed answers ({', '.join(sorted(labels))}) and require exactly one of them.")
    for task, _ in failed:
        bullets.append(f"- Add the example: {json.dumps(task.get('text'))} -> {task.get('label')}")
    return "\n".join(bullets) if bullets else "- The template works; keep it."


def rewrite(prompt: str) -> str:
    """The template of an APO rewrite prompt, with the critique's points applied."""
    found = _FENCED.search(prompt)
    template = found.group(1) if found else ""
    critique_text = prompt.split("Critique:\n", 1)[1] if "Critique:\n" in prompt else ""
    points = [line for line in critique_text.splitlines() if line.startswith("- ")]
    if "one careful improvement" in prompt:
        points = points[:1]
    lines = template.splitlines()
    labels: list[str] = []
    # Example lines are kept unescaped here and escaped again on the way out (literal braces must not become
    # placeholders).
    examples = [line.replace("{{", "{").replace("}}", "}") for line in lines if line.startswith(_EXAMPLE)]
    for line in lines:
        if line.startswith(_LABELS_LINE):
            labels = [label.strip(" .") for label in line[len(_LABELS_LINE) :].split(",") if label.strip(" .")]
    body = [line for line in lines if not line.startswith((_LABELS_LINE, _EXAMPLE))]
    for point in points:
        listed = re.match(r"- List the allowed answers \((.*)\)", point)
        if listed:
            labels = sorted(set(labels) | {label.strip() for label in listed.group(1).split(",")})
        example = re.match(r"- Add the example: (\".*\") -> (\w+)", point)
        if example:
            line = f"{_EXAMPLE} {json.loads(example.group(1))} => {example.group(2)}"
            if line not in examples:
                examples = [*examples, line][-MAX_EXAMPLES:]
    head = [f"{_LABELS_LINE} {', '.join(labels)}."] if labels else []
    examples = [line.replace("{", "{{").replace("}", "}}") for line in examples]
    return "\n".join([*head, *examples, *body])


def answer(model: str, prompt: str) -> str:
    return critique(prompt) if "critic" in model else rewrite(prompt)


def create_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    counter = {"n": 0}

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        prompt = "\n".join(str(message.get("content") or "") for message in body.get("messages", []))
        counter["n"] += 1
        text = answer(str(body.get("model", "")), prompt)
        return JSONResponse(
            {
                "id": f"scripted-{counter['n']}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )

    async def models(request: Request) -> JSONResponse:
        data = [
            {"id": name, "object": "model", "owned_by": "scripted"} for name in ("scripted-critic", "scripted-editor")
        ]
        return JSONResponse({"object": "list", "data": data})

    return Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models, methods=["GET"])]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8123)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(create_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
