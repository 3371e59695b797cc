"""The files a finished GRPO run leaves in its run directory: reward curve and accuracy plots, JSON summary."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from .health_log import health_summary

__all__ = ["plot_accuracy", "plot_rewards", "training_summary", "write_summary"]

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


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("Plots need matplotlib: `pip install 'agentlightning[train]'`") from exc
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
