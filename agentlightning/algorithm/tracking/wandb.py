"""Weights & Biases: one W&B run per algorithm run.

Offline by default (`mode="offline"`): the run is written under `<dir>/wandb/` with no network and no account, and
`wandb sync <run folder>` uploads it later. `mode="online"` (with `WANDB_API_KEY`) logs live. `WANDB_MODE` in the
environment wins over the default, as W&B users expect.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from .base import Tracker, flatten_params

__all__ = ["WandbTracker"]

_MODES = frozenset({"online", "offline", "disabled", "shared"})


class WandbTracker(Tracker):
    """Log the run to Weights & Biases (project `project`, run name `run_name`, files under `dir`)."""

    name = "wandb"

    def __init__(
        self,
        dir: Union[str, Path],
        *,
        project: str = "agentlightning",
        run_name: Optional[str] = None,
        mode: Optional[str] = None,
    ) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise ImportError(
                f"tracking='wandb' needs Weights & Biases: pip install 'agentlightning[tracking]' (or wandb) ({exc})"
            ) from exc
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        chosen: Any = mode or os.environ.get("WANDB_MODE") or "offline"
        if chosen not in _MODES:
            raise ValueError(f"W&B mode must be one of {sorted(_MODES)}, got {chosen!r}")
        settings = wandb.Settings(silent=True, console="off")
        # reinit: a second run in the same process (a resumed fit, tests) starts a run of its own
        self.run: Any = wandb.init(
            project=project, name=run_name, dir=str(self.dir), mode=chosen, settings=settings, reinit="create_new"
        )
        self._closed = False

    def log_params(self, params: Mapping[str, Any]) -> None:
        self.run.config.update(flatten_params(params), allow_val_change=True)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def log_text(self, name: str, text: str, step: int) -> None:
        self.run.log({name: text}, step=step)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.run.finish()
