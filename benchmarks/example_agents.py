"""Short real runs of the agents whose shape is not the plain Python chat loop: what capture and GRPO make of them.

`--example node`: examples/node_agent (a JavaScript agent on the `openai` npm package, run once per rollout by
`CommandAgent`, two LLM calls around one tool call). Reports its held-out accuracy before and after, the GRPO steps,
the calls per rollout captured through the LLM proxy and the share of rollouts whose calls joined into multi-turn
samples with their exact token ids (drift 0 means every call extended the one before it).

`--example compacting`: examples/compacting_agent (a sub-agent with a fresh conversation and a summary every two
turns, so a rollout's prompts do not extend each other). Reports the lineages per rollout, the calls that fitted no
lineage, the share of the generated tokens trained, and the held-out accuracy before and after.

Both run the example's own train.py on SmolLM2-135M-Instruct for `--minutes` of training (a fresh run directory);
the evaluations before and after come on top.

Usage:
    python benchmarks/example_agents.py --example node [--minutes 10] [--seed 0] [--json PATH]
    python benchmarks/example_agents.py --example compacting [--minutes 5] [--seed 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, add_json_argument, write_results

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FOLDERS = {"node": "node_agent", "compacting": "compacting_agent"}


def _load_train_script(folder: Path) -> ModuleType:
    """The example's train.py as a module (each example folder has one: loaded under a name of its own)."""
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"{folder.name}_train", folder / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _held_out(summary: dict[str, Any]) -> tuple[Optional[float], Optional[float], float]:
    accuracy = summary["held_out_accuracy"]
    before, after = accuracy.get("before"), accuracy.get("after")
    gain = after - before if before is not None and after is not None else float("nan")
    return before, after, gain


def _unfinished_note(summary: dict[str, Any]) -> str:
    """ "; 8 unfinished before, counted wrong" when held-out rollouts timed out (empty when none did)."""
    counts = summary.get("held_out_unfinished") or {}
    said = [f"{count} unfinished {label}" for label, count in counts.items() if count]
    return f"; {', '.join(said)}, counted wrong" if said else ""


def training_reward(summary: dict[str, Any], example: str, minutes: float, seed: int) -> Figure:
    """The mean training reward (sampled at the run's temperature) of the last five steps, with the first step's as
    the detail: what GRPO moved when a greedy held-out score has no room left."""
    rewards = [entry["reward_mean"] for entry in summary.get("history", []) if entry.get("reward_mean") is not None]
    last = rewards[-5:]
    first = rewards[0] if rewards else None
    value = sum(last) / len(last) if last else float("nan")
    return Figure(
        key=f"examples.{example}.training_reward",
        label=f"{example}: mean training reward of the last 5 steps (first step {first if first is None else round(first, 3)})",
        value=round(value, 4),
        unit="reward",
        target="reported (sampled at the training temperature)",
        detail={"first_step": first, "per_step": [round(r, 4) for r in rewards], "seed": seed, "minutes": minutes},
    )


def node_figures(summary: dict[str, Any], minutes: float, seed: int) -> list[Figure]:
    before, after, gain = _held_out(summary)
    drift = summary["drift"]
    common = {"steps": summary["steps"], "seed": seed, "minutes": minutes, "seconds": summary.get("seconds")}
    return [
        Figure(
            key="examples.node_agent.held_out_gain",
            label=f"JavaScript agent (CommandAgent, openai npm), {minutes:g} min of GRPO: held-out accuracy gain "
            f"({before} -> {after})",
            value=gain,
            unit="accuracy gain",
            target="reported (a short real run; issue 34 item 7)",
            detail={**common, "before": before, "after": after, "calls_per_rollout": summary["calls_per_rollout"]},
        ),
        Figure(
            key="examples.node_agent.drift_rate",
            label="JavaScript agent: share of multi-call rollouts whose calls did not extend each other (drift)",
            value=float(drift.get("rate") or 0.0),
            unit="share of rollouts",
            target="0 (every call captured with exact token ids, one sample per rollout)",
            met=not drift.get("rate"),
            detail={**common, "drift": {k: v for k, v in drift.items() if k != "per_rollout"}},
        ),
        training_reward(summary, "node_agent", minutes, seed),
    ]


def compacting_figures(summary: dict[str, Any], minutes: float, seed: int) -> list[Figure]:
    before, after, gain = _held_out(summary)
    lineages = summary["lineages"]
    common = {"steps": summary["steps"], "seed": seed, "minutes": minutes, "lineages": lineages}
    return [
        Figure(
            key="examples.compacting.trained_share",
            label=f"Compacting agent (sub-agent + summaries), {minutes:g} min of GRPO: share of generated tokens "
            f"trained ({lineages.get('lineages_per_rollout')} lineages per rollout"
            + ("; none trained: no group's rewards varied)" if lineages.get("trained_share") is None else ")"),
            value=float("nan") if lineages.get("trained_share") is None else float(lineages["trained_share"]),
            unit="share of generated tokens",
            target="reported (what masking truncated calls leaves; the summaries are trained)",
            detail=common,
        ),
        Figure(
            key="examples.compacting.calls_fitting_no_lineage",
            label="Compacting agent: calls whose prompt extended no earlier conversation of their rollout",
            value=float(lineages.get("calls_fitting_no_lineage") or 0),
            unit="calls",
            target="0 (every call joins a lineage)",
            met=not lineages.get("calls_fitting_no_lineage"),
            higher_is_better=False,
            detail=common,
        ),
        Figure(
            key="examples.compacting.held_out_gain",
            label=f"Compacting agent: held-out accuracy gain in {minutes:g} min ({before} -> {after}"
            + _unfinished_note(summary)
            + ")",
            value=gain,
            unit="accuracy gain",
            target="reported (a short real run; issue 34 item 8)",
            detail={**common, "before": before, "after": after, "unfinished": summary.get("held_out_unfinished")},
        ),
        training_reward(summary, "compacting", minutes, seed),
    ]


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", choices=sorted(FOLDERS), required=True)
    parser.add_argument("--minutes", type=float, default=None, help="training minutes (default: the example's own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, default=None, help="default runs/bench-<example>")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    run_dir = args.run_dir or Path(f"runs/bench-{args.example}")
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run: resuming would mix two runs' figures
    train = _load_train_script(EXAMPLES / FOLDERS[args.example])
    minutes = args.minutes if args.minutes is not None else train.parse_args([]).minutes
    train.main(["--minutes", str(minutes), "--run-dir", str(run_dir), "--seed", str(args.seed)])
    summary = json.loads((run_dir / "summary.json").read_text())
    figures_of = node_figures if args.example == "node" else compacting_figures
    write_results(args.json, figures_of(summary, minutes, args.seed))
    return summary


if __name__ == "__main__":
    main()
