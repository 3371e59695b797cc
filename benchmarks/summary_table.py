"""The generated parts of the benchmark pages, from benchmark result files (never typed by hand).

    .venv/bin/python benchmarks/summary_table.py             # rewrite both from benchmarks/results/*.json
    .venv/bin/python benchmarks/summary_table.py --check     # exit 1 when a page disagrees

docs/benchmarks.md holds the overview (`overview.py`: one question per benchmark, its headline figures and peers);
docs/benchmarks-appendix.md the full table (this module: every figure with its provenance) and the lab notes;
examples/calc_agent/README.md the calculator agent's results (`calc_table.py`).

A result file is what `benchmarks/_results.py` writes for one run of one benchmark (`<name>.json`, named after the
benchmark's entry in `benchmarks/run_all.py`). `merge_results` copies result files into `benchmarks/results/`, the
newest run of each benchmark winning; `render_table` turns them into markdown, one row per figure, each row with the
commit, date and load average of the run that measured it (rows from different runs say so);
`replace_summary` puts the table between the markers `<!-- summary:begin -->` and `<!-- summary:end -->`. A figure
compared with a peer in the same run is a tie when the two are within `TIE_RATIO` (5 %), whatever its target.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import PRELIMINARY_LOAD  # benchmarks/_results.py

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "benchmarks.md"  # the overview
APPENDIX = REPO / "docs" / "benchmarks-appendix.md"  # the full table and the lab notes
TIE_RATIO = 0.05  # ours and a peer within 5 % of each other: a tie, neither "met" nor "not met"
BEGIN = "<!-- summary:begin -->"
END = "<!-- summary:end -->"

__all__ = [
    "APPENDIX",
    "BEGIN",
    "DOC",
    "END",
    "TIE_RATIO",
    "cell",
    "format_value",
    "load_results",
    "machine_label",
    "merge_results",
    "package_code_line",
    "peer_text",
    "regenerate",
    "render_table",
    "replace_between",
    "replace_summary",
    "summary_section",
    "verdict",
]


def load_results(directory: Path) -> dict[str, dict[str, Any]]:
    """The result records of a folder, by benchmark name (the file's stem); files that are not records are refused."""
    records: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(directory).glob("*.json")):
        records[path.stem] = _read_record(path)
    return records


def _read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable benchmark result ({exc})") from exc
    missing = [field for field in ("date", "commit", "figures") if not isinstance(record, dict) or field not in record]
    if missing:
        raise ValueError(f"{path}: not a benchmark result (no {', '.join(missing)})")
    return record


def merge_results(sources: Iterable[Path], target: Path = RESULTS_DIR) -> list[str]:
    """Copy the result files of `sources` (folders or files) into `target`; per benchmark the newest run wins.

    Returns the names of the benchmarks whose file in `target` changed.
    """
    newest: dict[str, dict[str, Any]] = {}
    for source in sources:
        source = Path(source)
        if source.is_dir():
            found = load_results(source)
        elif source.is_file():
            found = {source.stem: _read_record(source)}
        else:
            raise ValueError(f"{source}: no such result file or folder")
        for name, record in found.items():
            if name not in newest or record["date"] > newest[name]["date"]:
                newest[name] = record
    target.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, record in sorted(newest.items()):
        path = target / f"{name}.json"
        if path.exists() and _read_record(path)["date"] >= record["date"]:
            continue
        path.write_text(json.dumps(record, indent=2) + "\n")
        changed.append(name)
    return changed


def format_value(value: Optional[float]) -> str:
    """A figure as the table shows it: thousands separated, about three significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.01:
        return f"{value:.2f}"
    return f"{value:.2g}"


def verdict(figure: Mapping[str, Any]) -> str:
    """ "met", "**not met**", "tie" (a peer within `TIE_RATIO`), "n/a" (a target, no verdict) or "" (no target)."""
    met = figure.get("met")
    if figure.get("target") is None:
        return ""
    ratio = figure.get("ratio")
    if figure.get("peer") and isinstance(ratio, (int, float)) and abs(ratio - 1.0) <= TIE_RATIO:
        return "tie"
    return "n/a" if met is None else ("met" if met else "**not met**")


def peer_text(figure: Mapping[str, Any]) -> str:
    """The peer measured in the same run and our ratio to it ("" when there is none)."""
    peer = figure.get("peer")
    if not peer:
        return ""
    text = f"{peer['name']}: {format_value(peer['value'])}"
    ratio = figure.get("ratio")
    return f"{text} (ours {ratio:.2f}x)" if ratio is not None else text


def _load(record: Mapping[str, Any]) -> str:
    before, after = record.get("load_before"), record.get("load_after")
    return " -> ".join("n/a" if value is None else f"{value:.1f}" for value in (before, after))


def machine_label(machine: Optional[Mapping[str, Any]]) -> str:
    """The CPU of a run in a few words, with whether it computes bfloat16 natively (AVX512-BF16 or AMX): figures
    of different CPUs do not compare, and bfloat16 figures only hold on CPUs like the one that measured them."""
    if not machine or not machine.get("cpu"):
        return "n/a"
    words = [w for w in str(machine["cpu"]).replace("(R)", "").replace("(TM)", "").split() if w != "Processor"]
    bf16 = machine.get("native_bf16")
    return " ".join(words) + ("" if bf16 is None else (", native bf16" if bf16 else ", no native bf16"))


def cell(text: str) -> str:
    """`text` safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(records: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()) -> str:
    """Markdown: one row per figure, benchmarks in `order` first (then by name), figures in the order measured."""
    rank = {name: index for index, name in enumerate(order)}
    names = sorted(records, key=lambda name: (rank.get(name, len(rank)), name))
    lines = [
        "| figure | measured | target | | peer, same run (ratio) | benchmark | commit | date (UTC) | load (1 min) "
        "| machine |",
        "|---|---:|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        record = records[name]
        date = str(record["date"])[:16].replace("T", " ")
        machine = machine_label(record.get("machine"))
        for figure in record["figures"]:
            cells = [
                figure["label"],
                f"{format_value(figure['value'])} {figure['unit']}".strip(),
                figure.get("target") or "",
                verdict(figure),
                peer_text(figure),
                f"`{name}`" + (" (quick)" if record.get("run_all", {}).get("mode") == "quick" else ""),
                str(record["commit"]),
                date,
                _load(record),
                machine,
            ]
            lines.append("| " + " | ".join(cell(text) for text in cells) + " |")
    return "\n".join(lines) + "\n"


def package_code_line(records: Mapping[str, Mapping[str, Any]]) -> str:
    """Which package code the rows measured: the benchmarks grouped by the git tree of the `agentlightning/` their run
    imported (`package_tree` in the result), largest group first. Rows at different commits with the same tree ran
    the same code; a run with uncommitted package changes, or from before the field existed, has none."""
    groups: dict[str, list[str]] = {}
    for name, record in records.items():
        groups.setdefault(record.get("package_tree") or "", []).append(name)
    parts = []
    for tree, names in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        commits = sorted({str(records[name]["commit"]) for name in names})
        who = f"{len(names)} benchmarks" if len(names) > 5 else ", ".join(f"`{name}`" for name in sorted(names))
        label = f"tree `{tree}`" if tree else "not recorded or uncommitted"
        parts.append(f"{label} ({'commit' if len(commits) == 1 else 'commits'} {', '.join(commits)}): {who}")
    return (
        "Package code measured (the git tree of the `agentlightning/` directory each run imported; the same tree "
        "is the same code whatever the commit): " + "; ".join(parts) + "."
    )


def summary_section(records: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()) -> str:
    """What goes between the markers: a line on where it comes from, then the table."""
    note = (
        "Generated by `benchmarks/summary_table.py` from `benchmarks/results/*.json` (do not edit by hand). "
        "Each row carries the commit, date and 1-minute load average before and after the run that measured it, and "
        "the CPU it ran on (the machine changes between sessions: absolute figures of different CPUs do not "
        "compare; ratios against a peer measured in the same run do). "
        f"On this 2-core machine a load above {PRELIMINARY_LOAD:g} before a run means other jobs shared the cores: "
        "such rows are preliminary (the load after includes the benchmark's own processes). *(quick)*: the short settings of "
        "`run_all.py --quick`, not the full ones."
    )
    return f"{BEGIN}\n{note}\n\n{package_code_line(records)}\n\n{render_table(records, order)}{END}"


def replace_between(document: str, begin: str, end: str, section: str) -> str:
    """`document` with the text from `begin` to `end` (both included) replaced by `section`."""
    start, stop = document.find(begin), document.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"the document has no {begin} ... {end} section")
    return document[:start] + section + document[stop + len(end) :]


def replace_summary(document: str, section: str) -> str:
    """`document` with the text from BEGIN to END (both included) replaced by `section`."""
    return replace_between(document, BEGIN, END, section)


def _registry_order() -> list[str]:
    from run_all import REGISTRY  # benchmarks/ is on sys.path (above)

    return [benchmark.name for benchmark in REGISTRY]


def regenerate(
    results: Path = RESULTS_DIR, doc: Path = DOC, appendix: Path = APPENDIX, calc_readme: Optional[Path] = None
) -> list[tuple[Path, str, str]]:
    """(page, as it is, regenerated from `results`) for the overview page `doc`, the full table's `appendix` and the
    calculator example's README (`calc_readme`, by default examples/calc_agent/README.md; left out when `results`
    holds no calc_* result)."""
    import calc_table  # benchmarks/calc_table.py
    import overview  # benchmarks/overview.py

    records, order = load_results(results), _registry_order()
    pages = []
    current = doc.read_text()
    section = overview.overview_section(records, order)
    pages.append((doc, current, replace_between(current, overview.BEGIN, overview.END, section)))
    current = appendix.read_text()
    pages.append((appendix, current, replace_summary(current, summary_section(records, order))))
    calc = [records[name] for name in calc_table.BENCHMARKS if name in records]
    readme = calc_readme or calc_table.README
    if calc and readme.is_file():
        current = readme.read_text()
        section = calc_table.calc_section(calc)
        pages.append((readme, current, replace_between(current, calc_table.BEGIN, calc_table.END, section)))
    return pages


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of result files")
    parser.add_argument("--doc", type=Path, default=DOC, help="the overview page")
    parser.add_argument("--appendix", type=Path, default=APPENDIX, help="the page of the full table")
    parser.add_argument("--check", action="store_true", help="only check: exit 1 when a page disagrees")
    args = parser.parse_args(argv)
    stale = 0
    for page, current, regenerated in regenerate(args.results, args.doc, args.appendix):
        if current == regenerated:
            continue
        if args.check:
            print(f"{page}: differs from {args.results}; run benchmarks/summary_table.py")
            stale += 1
        else:
            page.write_text(regenerated)
            print(f"{page}: rewritten from {args.results}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
