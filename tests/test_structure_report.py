"""scripts/structure_report.py counts what issue 35 measures from the syntax tree, not from text."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "structure_report.py"
spec = importlib.util.spec_from_file_location("structure_report", SCRIPT)
assert spec is not None and spec.loader is not None
structure_report = importlib.util.module_from_spec(spec)
sys.modules["structure_report"] = structure_report  # dataclasses look their module up there
spec.loader.exec_module(structure_report)


def _count(path: str, source: str) -> Any:
    counts = structure_report.Counts()
    structure_report.count_module(path, textwrap.dedent(source), counts)
    return counts


def test_threads_loops_and_handoffs_are_counted_from_calls() -> None:
    counts = _count(
        "agentlightning/x.py",
        """
        import asyncio, threading
        from concurrent.futures import ThreadPoolExecutor
        threading.Thread(target=print).start()
        ThreadPoolExecutor(max_workers=1)
        asyncio.run(main())
        loop = asyncio.new_event_loop()
        asyncio.run_coroutine_threadsafe(main(), loop)
        loop.call_soon_threadsafe(print)
        await asyncio.to_thread(print)
        """,
    )
    assert (counts.threads_started, counts.event_loops_created, counts.cross_thread_handoffs) == (2, 2, 3)


def test_names_in_comments_and_strings_do_not_count() -> None:
    counts = _count("agentlightning/x.py", '# asyncio.run(x)\ntext = "threading.Thread(target=f)"\n')
    assert (counts.threads_started, counts.event_loops_created, counts.cross_thread_handoffs) == (0, 0, 0)
    assert counts.lines == 2 and counts.files == 1


def test_agents_is_none_counts_only_inside_grpo() -> None:
    source = "if self.agents is None:\n    pass\nif agents is not None:\n    pass\n"
    assert _count("agentlightning/algorithm/grpo/a.py", source).grpo_agents_is_none == 2
    assert _count("agentlightning/trainer/a.py", source).grpo_agents_is_none == 0


def test_a_file_over_500_lines_is_listed() -> None:
    counts = _count("agentlightning/big.py", "x = 1\n" * 501)
    assert counts.large_files == {"agentlightning/big.py": 501}
