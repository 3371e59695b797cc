"""The files a GRPO run leaves in its `output_dir` (`write_run_outputs`): summary.json, the reward curve and
held-out accuracy plots, and the trained model (`final_model/`); and the helpers that build them, which a script may
call to extend them (its own summary keys, its own accuracy checks)."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from .reporting.health_log import health_summary

__all__ = ["plot_accuracy", "plot_rewards", "run_summary", "training_summary", "write_run_outputs", "write_summary"]

logger = logging.getLogger(__name__)

_TIMED_PARTS = ("rollout", "adapter", "update", "weight_swap", "total")


def training_summary(algorithm: Any) -> dict[str, Any]:
    """What a GRPO run did, for its summary.json: steps, settings, mean seconds per step (this run's steps), what
    was skipped, how its calls joined into multi-turn samples (drift per run and per rollout that drifted; lineages
    per rollout, calls that fitted no lineage, share of the generated tokens trained), and what
    it sampled to find informative groups, and its health: the warnings seen and the held-out verdict (see
    docs/algorithms.md, "Reading a run's health"). `algorithm` is a `GRPO` after (or during) `run`."""
    history = algorithm.history
    timed = [e for e in history if e["step"] > algorithm.start_step and "seconds" in e]
    calls = [e["calls_per_rollout"] for e in timed if e.get("calls_per_rollout") is not None]
    tokens = {
        "sample_tokens": sum(e.get("sample_tokens", 0) for e in timed),
        "transition_tokens": sum(e.get("transition_tokens", 0) for e in timed),
    }
    return {
        "settings": algorithm.config.to_dict(),
        "steps": algorithm.step,
        "resumed_from": algorithm.resumed_from,
        "mean_seconds_per_step": {
            part: round(sum(e["seconds"][part] for e in timed) / max(len(timed), 1), 3) for part in _TIMED_PARTS
        },
        "calls_per_rollout": {
            "first_step": calls[0] if calls else None,
            "last_5_steps": round(sum(calls[-5:]) / len(calls[-5:]), 3) if calls else None,
        },
        "drift": {**algorithm.drift.to_dict(), "per_rollout": dict(algorithm.rollout_drift)},
        "lineages": algorithm.drift.lineage_summary(),
        "group_sampling": algorithm.group_sampling.to_dict(),
        "training_tokens": {
            **tokens,
            "transition_over_trained": round(tokens["transition_tokens"] / tokens["sample_tokens"], 3)
            if tokens["sample_tokens"]
            else None,
        },
        "skips": algorithm.skips.to_dict(),
        "health": health_summary(history, algorithm.evaluations),
        "history": history,
    }


def run_summary(algorithm: Any) -> dict[str, Any]:
    """`GRPO.summary()`: `training_summary`, the evaluations by label, the wall seconds of the run's phases and the
    final model's folder (None: none saved). `algorithm` is a `GRPO` after (or during) `run`."""
    return {
        **training_summary(algorithm),
        "evaluations": {e.label: e.to_dict() for e in algorithm.evaluations},
        "seconds": dict(algorithm.phase_seconds),
        "final_model": str(algorithm.final_model_path) if algorithm.final_model_path is not None else None,
    }


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("Plots need matplotlib: `pip install 'agentlightning[plot]'`") from exc
    return plt


def plot_rewards(history: Sequence[Mapping[str, Any]], path: Path, *, window: int = 5) -> Path:
    """Mean training reward per step and its moving average over `window` steps."""
    plt = _pyplot()
    steps = [entry["step"] for entry in history if entry.get("reward_mean") is not None]
    rewards = [float(entry["reward_mean"]) for entry in history if entry.get("reward_mean") is not None]
    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(steps, rewards, alpha=0.35, label="mean reward per step")
    if len(rewards) >= window:
        smooth = [sum(rewards[i - window + 1 : i + 1]) / window for i in range(window - 1, len(rewards))]
        axis.plot(steps[window - 1 :], smooth, linewidth=2, label=f"moving average ({window} steps)")
    axis.set_xlabel("GRPO step")
    axis.set_ylabel("reward")
    axis.set_ylim(-0.05, 1.05)
    axis.grid(alpha=0.3)
    axis.legend(loc="lower right")
    axis.set_title("Training reward")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_accuracy(accuracy: Mapping[str, Mapping[str, Optional[float]]], path: Path) -> Path:
    """Grouped bars: for each check (e.g. strict, lenient) the held-out accuracy before and after training."""
    plt = _pyplot()
    checks = list(accuracy)
    figure, axis = plt.subplots(figsize=(6, 4))
    width = 0.35
    for offset, phase in ((-width / 2, "before"), (width / 2, "after")):
        values = [accuracy[check].get(phase) or 0.0 for check in checks]
        bars = axis.bar([i + offset for i in range(len(checks))], values, width, label=phase)
        for bar, value in zip(bars, values, strict=True):
            axis.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom")
    axis.set_xticks(range(len(checks)), checks)
    axis.set_ylim(0, 1.1)
    axis.set_ylabel("held-out accuracy (greedy)")
    axis.set_title("Held-out accuracy before and after training")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_summary(path: Path, summary: Mapping[str, Any]) -> Path:
    """Write `summary` as indented JSON atomically (temp file, then rename)."""
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(json.dumps(summary, indent=2, default=str))
    temp.replace(path)
    return path


def write_run_outputs(algorithm: Any, directory: Path, *, final_model: bool = True) -> dict[str, Any]:
    """Write what a GRPO run leaves in `directory` and return the summary: `final_model/` (the merged model, when
    `final_model` and a policy exists; several agents: one adapter folder per agent), `summary.json`
    (`algorithm.summary()`), `reward_curve.png` (training reward per step) and `accuracy.png` (mean held-out reward
    before and after, when an evaluation ran). Without matplotlib the plots are skipped with one log line."""
    directory.mkdir(parents=True, exist_ok=True)
    if final_model and algorithm.policy is not None:
        algorithm.final_model_path = save_final_model(algorithm.policy, directory / "final_model")
    summary: dict[str, Any] = algorithm.summary()
    write_summary(directory / "summary.json", summary)
    try:
        plot_rewards(summary["history"], directory / "reward_curve.png")
        rewards = {label: report.get("mean_reward") for label, report in summary["evaluations"].items()}
        if rewards:
            plot_accuracy({"mean reward": rewards}, directory / "accuracy.png")
    except RuntimeError as exc:  # matplotlib is missing
        logger.warning("GRPO: no reward_curve.png / accuracy.png in %s: %s", directory, exc)
    return summary


def save_final_model(policy: Any, folder: Path) -> Path:
    """Save `policy` to `folder` (replacing an earlier final model only once the new one is complete): the full model
    with LoRA merged in, or, for several agents' adapters (no `save_merged`), each agent's adapter and the tokenizer."""
    staging = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    if hasattr(policy, "save_merged"):
        policy.save_merged(staging)
    else:
        policy.save_model(staging)
    shutil.rmtree(folder, ignore_errors=True)
    staging.replace(folder)
    logger.info("GRPO: the trained model is in %s", folder)
    return folder
