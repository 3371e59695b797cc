"""`agl export`: write a store's captured LLM calls as a dataset for other trainers (SFT, RL, DPO).

    agl export --store sqlite:///runs/store.db --kind sft --min-reward 1 --out sft.jsonl
    agl export --store http://10.0.0.5:4747 --kind preference --format parquet --out pairs.parquet
    agl export --store sqlite:///runs/store.db --kind rl --agent-match '^solver$' > solver.jsonl

The store is streamed (no whole-store load); progress goes to stderr, records to the file (or stdout for JSON Lines).
The columns of each kind are in docs/export.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

__all__ = ["main"]

_PLAIN_PROGRESS_SECONDS = 10.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agl export", description="Export a store's captured LLM calls as SFT, RL or preference data."
    )
    parser.add_argument(
        "--store", required=True, help="store URL: sqlite:///path.db, postgresql://..., or http(s)://host:port"
    )
    parser.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl", help="output format (default jsonl)")
    parser.add_argument(
        "--kind",
        choices=["sft", "preference", "rl"],
        default="sft",
        help="sft: messages + input_ids/assistant_masks; rl: prompt/response ids, loss mask, reward, group; "
        "preference: best vs worst response of a group (default sft)",
    )
    parser.add_argument(
        "--unit",
        choices=["conversation", "call"],
        default="conversation",
        help="one record per stitched conversation (default) or per LLM call (sft, rl)",
    )
    parser.add_argument(
        "--tool-turns",
        choices=["openai", "text"],
        default="openai",
        help="openai: tool calls as tool_calls, results as role tool, a tools column (templates that render tools); "
        "text: calls, results and tools written as the text the model saw (templates that do not, e.g. SmolLM2's) "
        "(default openai)",
    )
    parser.add_argument("--agent-match", default=None, help="regex on agent names: export only their calls")
    parser.add_argument(
        "--min-reward",
        type=float,
        default=None,
        help="keep rollouts whose reward is at least X (preference: pairs whose chosen side reaches X)",
    )
    parser.add_argument(
        "--mode", action="append", choices=["train", "val", "test"], help="only rollouts of this mode (repeatable)"
    )
    parser.add_argument("--out", type=Path, default=None, help="output file (default: stdout, JSON Lines only)")
    parser.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")
    parser.add_argument("--summary-json", action="store_true", help="end with the summary as one JSON line on stderr")
    return parser


def _fail(message: str, code: int = 2) -> int:
    print(f"agl export: {message}", file=sys.stderr, flush=True)
    return code


def _check(args: argparse.Namespace) -> Optional[str]:
    """The first problem with the arguments, or None."""
    if args.agent_match is not None:
        try:
            re.compile(args.agent_match)
        except re.error as exc:
            return f"--agent-match {args.agent_match!r} is not a valid regular expression: {exc}"
    if args.min_reward is not None and not math.isfinite(args.min_reward):
        return f"--min-reward must be a finite number, got {args.min_reward}"
    if args.kind == "preference" and args.unit != "conversation":
        return "--unit call applies to --kind sft and rl; preference pairs compare whole conversations"
    if args.out is not None:
        if args.out.is_dir():
            return f"--out {args.out} is a directory; give a file path"
        if not args.out.parent.is_dir():
            return f"--out {args.out}: the directory {args.out.parent} does not exist"
    elif args.format == "parquet":
        return "--format parquet needs --out PATH (Parquet is not written to stdout)"
    return None


def _progress(quiet: bool) -> tuple[Callable[[str, int, Optional[int]], None], Callable[[], None]]:
    """A progress callback and its closer: a rich bar when stderr is a terminal, a plain line every 10 s otherwise."""
    if quiet:
        return (lambda phase, done, total: None), (lambda: None)
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        tasks: dict[str, Any] = {}
        bar.start()

        def update(phase: str, done: int, total: Optional[int]) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        return update, bar.stop
    return PlainProgress(), lambda: None


class PlainProgress:
    """Progress as plain lines on stderr (not a terminal): the first report, then at most one line every `interval`
    seconds, and each phase's completion (done reaching total) once, however often it is reported."""

    def __init__(
        self,
        interval: float = _PLAIN_PROGRESS_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        emit: Optional[Callable[[str], None]] = None,
    ) -> None:
        self._interval = interval
        self._clock = clock
        self._emit = emit or (lambda line: print(line, file=sys.stderr, flush=True))
        self._last_line_at: Optional[float] = None
        self._completed: set[tuple[str, Optional[int]]] = set()

    def __call__(self, phase: str, done: int, total: Optional[int]) -> None:
        now = self._clock()
        complete = total is not None and done >= total
        if complete:
            if (phase, total) in self._completed:
                return
            self._completed.add((phase, total))
        elif self._last_line_at is not None and now - self._last_line_at < self._interval:
            return
        self._last_line_at = now
        of = f" of {total:,}" if total is not None else ""
        self._emit(f"agl export: {phase} {done:,}{of}")


def _print_summary(summary: Any, args: argparse.Namespace) -> None:
    where = str(args.out) if args.out is not None else "stdout"
    unit = "" if args.kind == "preference" else f", per {args.unit}"
    print(
        f"agl export: {summary.records:,} records ({args.kind}{unit}) from {summary.rollouts_exported:,} of "
        f"{summary.rollouts_seen:,} rollouts to {where} in {summary.seconds:.1f} s",
        file=sys.stderr,
    )
    print(
        f"  {summary.calls:,} calls in {summary.conversations:,} conversations; drift: {summary.drifted_calls:,} of "
        f"{summary.continuations:,} continuing calls ({100 * summary.drift_rate:.1f}%)",
        file=sys.stderr,
    )
    if summary.skipped:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in summary.skipped.items())
        print(f"  left out: {reasons}", file=sys.stderr)
    if summary.no_calls_example:
        print(f"  why a rollout had no calls, e.g. {summary.no_calls_example}", file=sys.stderr)


def _discarded(args: argparse.Namespace) -> str:
    return f"; {args.out} was not written" if args.out is not None else ""


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    problem = _check(args)
    if problem:
        return _fail(problem)
    from agentlightning.cli.options import missing_sqlite_file
    from agentlightning.export import ExportOptions, export_store, open_writer
    from agentlightning.store.url import store_from_url

    missing = missing_sqlite_file(args.store)
    if missing:
        return _fail(f"no SQLite store at {missing} (from --store {args.store})", 1)
    try:
        options = ExportOptions(
            kind=args.kind,
            unit=args.unit,
            agent_match=args.agent_match,
            min_reward=args.min_reward,
            mode_in=args.mode,
            tool_turns=args.tool_turns,
        )
        store = store_from_url(args.store)
    except ValueError as exc:
        return _fail(str(exc))
    except Exception as exc:  # a store that cannot open (missing file, unreachable database)
        return _fail(f"cannot open the store {args.store}: {exc}", 1)
    if args.store.startswith("memory:"):
        print("agl export: memory:// opens a new, empty store; point --store at the store a run used", file=sys.stderr)
    try:
        writer = open_writer(args.format, args.kind, args.out)
    except (ImportError, ValueError) as exc:
        return _fail(str(exc), 1)
    update, stop = _progress(args.quiet)

    async def run() -> Any:
        try:
            return await export_store(store, writer, options, update)
        finally:
            await store.close()

    try:
        summary = asyncio.run(run())
    except KeyboardInterrupt:
        stop()
        writer.abort()
        return _fail(f"interrupted{_discarded(args)}", 130)
    except Exception as exc:
        stop()
        writer.abort()
        return _fail(f"export failed{_discarded(args)}: {type(exc).__name__}: {exc}", 1)
    stop()
    writer.close()
    if not args.quiet:
        _print_summary(summary, args)
    if args.summary_json:
        print(json.dumps(summary.to_dict()), file=sys.stderr, flush=True)
    return 0
