"""The structural measures of issue 35 for the package at a commit: lines, files, concurrency plumbing.

    python scripts/structure_report.py                    # the working tree's agentlightning/
    python scripts/structure_report.py --at f474d5a HEAD  # side by side, read from git (nothing is checked out)
    python scripts/structure_report.py --json             # machine-readable

Counts, from the syntax tree of every module (comments and strings never count):
- lines of package Python (physical lines of the .py files) and files, and the files over 500 lines;
- threads started: calls of `threading.Thread(...)` / `Thread(...)` and `ThreadPoolExecutor(...)`;
- event loops created: `asyncio.run`, `asyncio.new_event_loop`, `asyncio.Runner`, `anyio.run`;
- cross-thread hand-offs: `run_coroutine_threadsafe`, `call_soon_threadsafe`, `asyncio.to_thread`,
  `run_in_executor`, `wrap_future`, `anyio.from_thread.*` and `BlockingPortal` calls;
- `agents is None` / `agents is not None` comparisons in GRPO (one policy as a special case of several).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "agentlightning"
LARGE_FILE_LINES = 500

THREAD_CALLS = {"Thread", "ThreadPoolExecutor"}
LOOP_CALLS = {("asyncio", "run"), ("asyncio", "new_event_loop"), ("asyncio", "Runner"), ("anyio", "run")}
HANDOFF_NAMES = {
    "run_coroutine_threadsafe",
    "call_soon_threadsafe",
    "to_thread",
    "run_in_executor",
    "wrap_future",
    "BlockingPortal",
    "start_blocking_portal",
}


@dataclass
class Counts:
    """The measures of one version of the package."""

    lines: int = 0
    files: int = 0
    large_files: dict[str, int] = field(default_factory=dict)
    threads_started: int = 0
    event_loops_created: int = 0
    cross_thread_handoffs: int = 0
    grpo_agents_is_none: int = 0


def _call_name(node: ast.Call) -> tuple[Optional[str], str]:
    """(the object a call is made on, if a plain name, the called name): `asyncio.run(...)` -> ("asyncio", "run")."""
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        return owner, func.attr
    if isinstance(func, ast.Name):
        return None, func.id
    return None, ""


def _is_agents_none_check(node: ast.Compare) -> bool:
    left = node.left
    named_agents = (isinstance(left, ast.Name) and left.id == "agents") or (
        isinstance(left, ast.Attribute) and left.attr == "agents"
    )
    return (
        named_agents
        and len(node.ops) == 1
        and isinstance(node.ops[0], (ast.Is, ast.IsNot))
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value is None
    )


def count_module(path: str, source: str, counts: Counts) -> None:
    """Add one module's measures to `counts` (a module that does not parse is an error naming it)."""
    lines = source.count("\n") + (0 if source.endswith("\n") or not source else 1)
    counts.lines += lines
    counts.files += 1
    if lines > LARGE_FILE_LINES:
        counts.large_files[path] = lines
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise SystemExit(f"{path} does not parse: {exc}") from exc
    in_grpo = "/algorithm/grpo/" in f"/{path}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            owner, name = _call_name(node)
            if name in THREAD_CALLS:
                counts.threads_started += 1
            elif (owner, name) in LOOP_CALLS:
                counts.event_loops_created += 1
            elif name in HANDOFF_NAMES or owner == "from_thread":
                counts.cross_thread_handoffs += 1
        elif in_grpo and isinstance(node, ast.Compare) and _is_agents_none_check(node):
            counts.grpo_agents_is_none += 1


def _working_tree_sources() -> Iterator[tuple[str, str]]:
    for path in sorted((REPO / PACKAGE).rglob("*.py")):
        yield str(path.relative_to(REPO)), path.read_text()


def _git_sources(revision: str) -> Iterator[tuple[str, str]]:
    try:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", revision, PACKAGE], cwd=REPO, capture_output=True, check=True
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"git cannot read {PACKAGE}/ at {revision!r}: {exc.stderr.decode().strip()}") from exc
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if member.isfile() and member.name.endswith(".py"):
                extracted = tar.extractfile(member)
                assert extracted is not None
                yield member.name, extracted.read().decode()


def measure(revision: Optional[str] = None) -> Counts:
    """The measures of the working tree (`revision` None) or of a git revision."""
    counts = Counts()
    for path, source in _working_tree_sources() if revision is None else _git_sources(revision):
        count_module(path, source, counts)
    return counts


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--at", nargs="+", metavar="REV", help="git revisions to measure (default: the working tree)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    names = args.at or ["working tree"]
    results = {name: measure(None if args.at is None else name) for name in names}
    if args.json:
        print(json.dumps({name: asdict(counts) for name, counts in results.items()}, indent=2))
        return 0
    rows = [f for f in Counts.__dataclass_fields__ if f != "large_files"]
    print("| measure | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for row in rows:
        print(f"| {row.replace('_', ' ')} | " + " | ".join(f"{getattr(c, row):,}" for c in results.values()) + " |")
    print(
        f"| files over {LARGE_FILE_LINES} lines | "
        + " | ".join(str(len(c.large_files)) for c in results.values())
        + " |"
    )
    for name, counts in results.items():
        for path, lines in sorted(counts.large_files.items(), key=lambda item: -item[1]):
            print(f"  {name}: {path} ({lines} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
