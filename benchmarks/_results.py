"""Machine-readable benchmark results: every script that backs a summary row writes its figures through here.

A script adds `--json PATH` to its parser with `add_json_argument` and, at the end, calls `write_results(args.json,
figures, ...)`. The file records what was measured (`Figure`), by which command, at which commit and with which
package code (`package_tree`), when, under which load (1-minute load average before and after), and on which
machine; `benchmarks/run_all.py` collects these files and writes the summary table of docs/benchmarks.md from them.

A `Figure`'s `key` is stable across runs (the summary table is keyed by it); `peer` names the alternative a user
would pick, measured in the same run, so the ratio holds even when absolute figures move with the machine's load.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Optional

__all__ = [
    "EXIT_UNAVAILABLE",
    "PRELIMINARY_LOAD",
    "Figure",
    "Peer",
    "add_json_argument",
    "current_commit",
    "exit_unavailable",
    "load_average",
    "load_averages_text",
    "machine_facts",
    "package_tree",
    "write_results",
]

REPO = Path(__file__).resolve().parent.parent
# A 1-minute load average above this before a run means other jobs shared the 2 cores: the run is preliminary.
PRELIMINARY_LOAD = 2.0
_LOAD_AT_START = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
# The exit status of a benchmark whose peer or engine is not installed on this machine (sysexits' EX_UNAVAILABLE):
# `run_all.py` reports it as not run here, with the reason, instead of as a failure.
EXIT_UNAVAILABLE = 69


def exit_unavailable(reason: str) -> NoReturn:
    """End a benchmark that cannot run on this machine (a missing optional engine or peer), saying why."""
    print(f"unavailable here: {reason}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_UNAVAILABLE)


@dataclass
class Peer:
    """The same figure for the alternative a user would pick (another library, the reference implementation);
    `rounds`: its value in each round of a run of several, in the order measured (empty: measured once)."""

    name: str
    value: float
    rounds: list[float] = field(default_factory=list)


@dataclass
class Figure:
    """One measured figure.

    Args:
        key: stable identifier, e.g. "store.memory.add_span_per_s".
        label: what it measures, as the summary row shows it.
        value: the figure.
        unit: its unit ("spans/s", "ms", "MB", "strict accuracy gain").
        target: the goal in words (">= 25,000/s"), or None.
        met: whether the target is met (None: no target).
        higher_is_better: direction, for ratios against the peer.
        peer: the alternative's figure from the same run, or None.
        detail: free-form facts a reader needs (spread, seeds, settings).
        rounds: the figure's value in each round (repeat, seed, trial) of a run of several, in the order measured;
            `value` is their median or mean, as the label or detail says (empty: measured once).
    """

    key: str
    label: str
    value: float
    unit: str
    target: Optional[str] = None
    met: Optional[bool] = None
    higher_is_better: bool = True
    peer: Optional[Peer] = None
    detail: dict[str, Any] = field(default_factory=dict)
    rounds: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> Optional[float]:
        """How many times better than the peer (>1: better); None without a peer or where a ratio means nothing (a
        value at or below zero, such as a negative accuracy gain: the table then shows both values, not a ratio)."""
        if self.peer is None or self.peer.value <= 0 or self.value <= 0:
            return None
        return self.value / self.peer.value if self.higher_is_better else self.peer.value / self.value


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """Add `--json PATH`: where to write the machine-readable results of this run."""
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON here")


def load_average() -> Optional[float]:
    """The 1-minute load average now (None where the platform has none)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def load_averages_text() -> str:
    """The 1-, 5- and 15-minute load averages as text for a log line ("n/a" where the platform has none)."""
    if not hasattr(os, "getloadavg"):
        return "n/a"
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def current_commit() -> str:
    """The short hash of HEAD, with `+dirty` when tracked files differ from it; `unknown` outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_tree(package: str = "agentlightning") -> Optional[str]:
    """The git tree hash of the directory of `package` that this process imports, or None when that directory has
    uncommitted changes (untracked files included) or lies outside git.

    The commit names the checkout the script ran from, which need not be the package it measured (an editable
    install imports from wherever it was installed); two runs with the same tree ran the same package code, whatever
    their commits.
    """
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        return None
    directory = Path(locations[0])
    git = ["git", "-C", str(directory.parent)]
    try:
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--", directory.name], capture_output=True, text=True, check=True
        ).stdout.strip()
        if changed:
            return None
        return subprocess.run(
            [*git, "rev-parse", "--short=10", f"HEAD:./{directory.name}"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def machine_facts() -> dict[str, Any]:
    """CPU model and count, memory, Python and OS, and whether the CPU computes bfloat16 natively."""
    flags = _cpu_flags()
    memory_gb: Optional[float] = None
    try:
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gb": memory_gb,
        "native_bf16": bool(flags & {"avx512_bf16", "amx_bf16"}),
        "avx512": "avx512f" in flags,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
    }


def write_results(
    path: Optional[Path], figures: list[Figure], *, script: Optional[str] = None, extra: Optional[dict[str, Any]] = None
) -> Optional[dict[str, Any]]:
    """Write this run's figures with their provenance to `path` (nothing when `path` is None); returns the record."""
    if path is None:
        return None
    started = _STARTED
    record: dict[str, Any] = {
        "script": script or Path(sys.argv[0]).name,
        "command": " ".join(["python", *(_relative(arg) for arg in sys.argv)]),
        "commit": started[0],
        "package_tree": started[1],
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "load_before": round(_LOAD_AT_START, 2) if _LOAD_AT_START is not None else None,
        "load_after": load_average(),
        "machine": machine_facts(),
        "figures": [_figure_record(figure) for figure in figures],
    }
    if extra:
        record["extra"] = extra
    at_end = (current_commit(), package_tree())
    if at_end != started:  # the checkout changed under the run: name both, the package it imported is ambiguous
        record["commit_at_end"], record["package_tree_at_end"] = at_end
        print(
            f"warning: the checkout changed during the run (commit {started[0]} -> {at_end[0]}, package tree "
            f"{started[1]} -> {at_end[1]}): both are recorded",
            file=sys.stderr,
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(path.name + ".partial")
    staging.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(staging, path)
    return record


def _figure_record(figure: Figure) -> dict[str, Any]:
    data = asdict(figure)
    data["ratio"] = figure.ratio
    return data


def _relative(arg: str) -> str:
    try:
        return str(Path(arg).resolve().relative_to(REPO)) if Path(arg).exists() else arg
    except ValueError:
        return arg


_STARTED: tuple[str, Optional[str]] = (current_commit(), package_tree())
"""The commit and package tree when the benchmark imported this module (its start): a result names the code it ran,
not what the checkout holds once the result is written."""
