"""Does the untrained reviewer of examples/multi_agent check the answer, or say one word whatever it is shown?

For the first `--tasks` held-out review tasks (alternately a right and a wrong proposed answer) the embedded
SmolLM2-135M-Instruct (fp32, transformers, no serving) answers the reviewer's chat (`team.review_messages`) greedily.
Where its reply contains "so ", the log-odds of " yes" against " no" as the next token after the reply up to "so" are
read too. A reviewer that compares has higher log-odds on right answers than on wrong ones; one that does not shows
the same verdict (and about the same log-odds) for both kinds.

    python benchmarks/reviewer_probe.py                 # 30 tasks, the example's reply format
    python benchmarks/reviewer_probe.py --tasks 10      # shorter

Prints, per kind, the greedy verdict accuracy, the share of correct reviews (`team.correct_review`: the verdict right
and following from faithful working) and the mean log-odds of "yes" over "no" (and each reply with `--replies`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "examples" / "multi_agent"))

import team  # noqa: E402  # pyright: ignore[reportMissingImports]  # examples/multi_agent/team.py
import train  # noqa: E402  # pyright: ignore[reportMissingImports]  # examples/multi_agent/train.py
from _results import current_commit, machine_facts  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=30, help="held-out review tasks (default 30)")
    parser.add_argument("--replies", action="store_true", help="print every reply")
    return parser.parse_args()


def main() -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentlightning.inference.model_files import ensure_converted

    args = parse_args()
    folder = ensure_converted()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    (yes_id,), (no_id,) = (
        tokenizer.encode(" yes", add_special_tokens=False),
        tokenizer.encode(" no", add_special_tokens=False),
    )
    _, held_out_pairs = train.split_tasks(0)
    tasks = train.held_out_tasks(held_out_pairs, 0)[: args.tasks]
    kinds: dict[str, dict[str, list[Any]]] = {
        "right": {"correct": [], "reviewed": [], "log_odds": []},
        "wrong": {"correct": [], "reviewed": [], "log_odds": []},
    }
    for task in tasks:
        shown, shown_right = team.review_input(task, "")
        text = tokenizer.apply_chat_template(
            team.review_messages(task["a"], task["b"], shown), add_generation_prompt=True, tokenize=False
        )
        prompt = torch.tensor([tokenizer.encode(text, add_special_tokens=False)])
        with torch.no_grad():
            output = model.generate(prompt, max_new_tokens=team.REVIEW_TOKENS, do_sample=False)  # pyright: ignore[reportAttributeAccessIssue]
        reply = tokenizer.decode(output[0, prompt.shape[1] :], skip_special_tokens=True)
        log_odds: Optional[float] = None
        cut = reply.rfind("so ")
        if cut >= 0:
            before_verdict = tokenizer.encode(reply[: cut + 2], add_special_tokens=False)
            ids = torch.cat([prompt, torch.tensor([before_verdict])], dim=1)
            with torch.no_grad():
                logits = model(ids).logits[0, -1].log_softmax(-1)
            log_odds = float(logits[yes_id] - logits[no_id])
        kind = "right" if shown_right else "wrong"
        kinds[kind]["correct"].append(1.0 if team.verdict(reply) == shown_right else 0.0)
        kinds[kind]["reviewed"].append(1.0 if team.correct_review(reply, task["a"], task["b"], shown) else 0.0)
        if log_odds is not None:
            kinds[kind]["log_odds"].append(log_odds)
        if args.replies:
            print(f"{kind:5} {task['a']} + {task['b']}, shown {shown}: {reply!r} log-odds {log_odds}")
    result: dict[str, Any] = {
        "commit": current_commit(),
        "load_average_1min": os.getloadavg()[0],
        "cpu": machine_facts().get("cpu"),
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF de-quantized, fp32), greedy",
        "tasks": len(tasks),
    }
    for kind, values in kinds.items():
        result[kind] = {
            "tasks": len(values["correct"]),
            "verdict_accuracy": round(statistics.fmean(values["correct"]), 3) if values["correct"] else None,
            "correct_reviews": round(statistics.fmean(values["reviewed"]), 3) if values["reviewed"] else None,
            "mean_log_odds_yes_over_no": round(statistics.fmean(values["log_odds"]), 3) if values["log_odds"] else None,
            "replies_with_a_verdict_point": len(values["log_odds"]),
        }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
