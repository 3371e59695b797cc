"""The files a finished GRPO run leaves in its run directory: reward curve and accuracy plots, JSON summary."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

__all__ = ["plot_accuracy", "plot_rewards", "write_summary"]


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
