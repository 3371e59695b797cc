"""Atomic checkpoints of a GRPO run: the policy as a Hugging Face folder, optimizer, step and RNG state.

Layout under `<output_dir>/checkpoints/`: `step-000010/` (`model/` from `save_pretrained`, `trainer_state.pt` with
the optimizer and RNG states, `state.json` with the step, counters and history) and `latest` (the name of the
newest complete checkpoint). A checkpoint is written into a temporary folder and renamed into place, and `latest`
is replaced atomically after that, so a save killed at any moment leaves the previous checkpoint as the latest.
Every file and folder of the staging folder is fsynced before the rename, and the parent folder after it: without
that, a power loss shortly after a save could leave `latest` naming a checkpoint whose files were never written.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["CheckpointError", "LoadedCheckpoint", "find_latest", "load_checkpoint", "save_checkpoint"]

logger = logging.getLogger(__name__)

_STEP_DIR = re.compile(r"^step-(\d+)$")
_STATE_FILE = "state.json"  # written last inside the staging folder: its presence marks a complete checkpoint


class CheckpointError(RuntimeError):
    """A checkpoint could not be read; the message names the folder and the problem."""


@dataclass
class LoadedCheckpoint:
    path: Path
    step: int
    state: dict[str, Any]


def _checkpoints_dir(output_dir: Path) -> Path:
    return output_dir / "checkpoints"


def _write_text_atomically(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with_suppressed_unlink(temp)
        raise


def _fsync_path(path: Path) -> None:
    """Flush one file or folder to disk (folders: their entries, so a rename or a new file survives a crash)."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if path.is_dir() else 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # e.g. folders cannot be opened on Windows; there is nothing more to do there
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """fsync every file under `root`, then every folder from the deepest up to `root` itself."""
    folders: list[Path] = []
    for folder, _, files in os.walk(root):
        folders.append(Path(folder))
        for name in files:
            _fsync_path(Path(folder) / name)
    for folder in reversed(folders):
        _fsync_path(folder)


def with_suppressed_unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def save_checkpoint(output_dir: Path, policy: Policy, step: int, state: dict[str, Any], *, keep: int = 2) -> Path:
    """Write checkpoint `step` (policy, optimizer, RNG, `state`) atomically; keep the newest `keep` of them."""
    import torch

    root = _checkpoints_dir(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:06d}"
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        policy.save_model(staging / "model")
        torch.save(
            {
                "optimizer": policy.optimizer_state(),
                "torch_rng": torch.get_rng_state(),
                "python_rng": random.getstate(),
            },
            staging / "trainer_state.pt",
        )
        (staging / _STATE_FILE).write_text(json.dumps({**state, "step": step}, indent=2, default=str))
        _fsync_tree(staging)
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
        _fsync_path(root)
        _write_text_atomically(root / "latest", name + "\n")
        _fsync_path(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _prune(root, keep, current=name)
    return target


def _complete_steps(root: Path) -> list[tuple[int, Path]]:
    found: list[tuple[int, Path]] = []
    if not root.is_dir():
        return found
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / _STATE_FILE).exists():
            found.append((int(match.group(1)), child))
    return sorted(found)


def _prune(root: Path, keep: int, current: str) -> None:
    steps = _complete_steps(root)
    for _, path in steps[: max(0, len(steps) - keep)]:
        if path.name != current:
            shutil.rmtree(path, ignore_errors=True)
    for child in root.iterdir():  # staging folders of saves that were killed
        if child.name.startswith(".step-") and child.is_dir():
            shutil.rmtree(child, ignore_errors=True)


def find_latest(output_dir: Path) -> Optional[Path]:
    """The newest complete checkpoint folder, or None (a `latest` naming a missing folder falls back to a scan)."""
    root = _checkpoints_dir(output_dir)
    pointer = root / "latest"
    if pointer.exists():
        candidate = root / pointer.read_text().strip()
        if (candidate / _STATE_FILE).exists():
            return candidate
        logger.warning("%s names %s, which is missing or incomplete; using the newest complete one", pointer, candidate)
    steps = _complete_steps(root)
    return steps[-1][1] if steps else None


def load_checkpoint(path: Path, policy: Policy) -> LoadedCheckpoint:
    """Restore the policy, optimizer and RNG state from `path`; return its step and recorded state."""
    import torch

    try:
        state = json.loads((path / _STATE_FILE).read_text())
        trainer_state = torch.load(path / "trainer_state.pt", weights_only=False)
    except (OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"The checkpoint {path} cannot be read: {exc}") from exc
    policy.load_model(path / "model")
    policy.load_optimizer_state(trainer_state["optimizer"])
    torch.set_rng_state(trainer_state["torch_rng"])
    random.setstate(trainer_state["python_rng"])
    return LoadedCheckpoint(path=path, step=int(state["step"]), state=state)
