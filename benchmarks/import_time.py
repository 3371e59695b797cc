"""How long `import agentlightning` takes in a fresh interpreter (median of several), and where the time goes.

Usage:
    python benchmarks/import_time.py [--runs 15] [--profile-runs 5] [--json PATH]

Each run is a new interpreter that times the import with `time.perf_counter`; the figure is the median over `--runs`
(after one untimed import that warms the file cache and writes the bytecode cache: the interpreters run without
PYTHONDONTWRITEBYTECODE, as on a user's machine, where the first import writes the `.pyc` files; with it set, every
import compiles the package's sources again and takes several times longer). The CPU time of the import
(`time.process_time`) is printed beside it: on a loaded machine it moves less than the wall-clock figure. Then
`--profile-runs` interpreters import it under `python -X importtime`, whose report (stderr: self and cumulative
microseconds per module, nested by indentation) is parsed and the median per module taken. Printed: the 10 modules
with the largest cumulative time, the time per top-level package (its modules' self time added up: which third-party
libraries the import pulls in), and our own modules by cumulative time.

`import agentlightning` resolves its public names on first use, so the import alone costs little: what a fresh
process pays is the import plus the first use of what a training script touches next (`agl.Trainer`, `agl.rollout`,
`agl.LLM`, `agl.emit_reward`), measured the same way as a row of its own (`import.first_use_median_ms`, where the time
went in its `detail`). The target, a median under 300 ms, applies to both. Each fresh interpreter's time is kept
(`rounds`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, add_json_argument, load_average, write_results

IMPORT = "import agentlightning"
USE = "import agentlightning as agl; agl.Trainer, agl.rollout, agl.LLM, agl.emit_reward"
"""What a training script touches right after the import: the names resolved on first use load their modules then."""
TIMED = (
    "import time; t, c = time.perf_counter(), time.process_time()\n{statement}\n"
    "print(time.perf_counter() - t, time.process_time() - c)"
)
TARGET_MS = 300.0
TOP = 10


@dataclass(frozen=True)
class ModuleTime:
    """One line of `-X importtime`: a module's own import time and the time including what it imported."""

    name: str
    self_us: int
    cumulative_us: int
    depth: int


def parse_importtime(stderr: str) -> list[ModuleTime]:
    """The module lines of a `-X importtime` report (other stderr lines are skipped).

    Each line reads `import time: <self us> | <cumulative us> | <indent><module>`; two spaces of indentation per
    nesting level below the module that imported it.
    """
    modules = []
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line[len("import time:") :].split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line
        name_field = fields[2].rstrip()
        stripped = name_field.lstrip(" ")
        depth = (len(name_field) - len(stripped) - 1) // 2
        modules.append(ModuleTime(stripped, int(fields[0]), int(fields[1]), depth))
    return modules


def _environment() -> dict[str, str]:
    """This environment without PYTHONDONTWRITEBYTECODE, so the bytecode cache is written once and then used."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def profile_once(python: str, statement: str) -> list[ModuleTime]:
    done = subprocess.run(
        [python, "-X", "importtime", "-c", statement], check=True, capture_output=True, text=True, env=_environment()
    )
    return parse_importtime(done.stderr)


def median_per_module(profiles: list[list[ModuleTime]]) -> dict[str, tuple[float, float]]:
    """Median (self ms, cumulative ms) per module over the profiles (a module missing from one counts 0 there)."""
    selfs: dict[str, list[float]] = defaultdict(list)
    cumulatives: dict[str, list[float]] = defaultdict(list)
    for profile in profiles:
        for module in profile:
            selfs[module.name].append(module.self_us / 1000)
            cumulatives[module.name].append(module.cumulative_us / 1000)
    runs = len(profiles)
    return {
        name: (
            statistics.median(selfs[name] + [0.0] * (runs - len(selfs[name]))),
            statistics.median(cumulatives[name] + [0.0] * (runs - len(cumulatives[name]))),
        )
        for name in selfs
    }


def by_package(times: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Self time added up per top-level package (ms): what each library costs the import, nesting aside."""
    packages: dict[str, float] = defaultdict(float)
    for name, (self_ms, _) in times.items():
        packages[name.split(".")[0]] += self_ms
    return dict(packages)


def measure(python: str, statement: str, runs: int) -> list[tuple[float, float]]:
    """(wall ms, CPU ms) of `statement` in `runs` fresh interpreters."""
    subprocess.run([python, "-c", statement], check=True, env=_environment())  # warm the caches
    samples = []
    for _ in range(runs):
        code = TIMED.format(statement=statement)
        out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True, env=_environment())
        wall, cpu = (float(value) * 1000 for value in out.stdout.split())
        samples.append((wall, cpu))
    return samples


def report(statement: str, runs: int, profile_runs: int) -> dict[str, Any]:
    """Time `statement`, profile it, print both; returns the figures (ms) and the top lists."""
    measured = measure(sys.executable, statement, runs)
    walls = [wall for wall, _ in measured]
    median, cpu_median = statistics.median(walls), statistics.median(cpu for _, cpu in measured)
    print(
        f"`{statement}`: median {median:.0f} ms (min {min(walls):.0f}, max {max(walls):.0f}) over {runs} fresh "
        f"interpreters; CPU time median {cpu_median:.0f} ms; load average {load_average()}"
    )
    times = median_per_module([profile_once(sys.executable, statement) for _ in range(profile_runs)])
    top = sorted(times.items(), key=lambda item: -item[1][1])[:TOP]
    packages = sorted(by_package(times).items(), key=lambda item: -item[1])[:TOP]
    ours = sorted(
        ((name, t) for name, t in times.items() if name.split(".")[0] == "agentlightning"), key=lambda item: -item[1][1]
    )[:TOP]
    print(f"  top {TOP} modules by cumulative import time (median of {profile_runs} -X importtime runs):")
    for name, (self_ms, cumulative_ms) in top:
        print(f"    {cumulative_ms:8.1f} ms  (self {self_ms:6.1f})  {name}")
    print(f"  top {TOP} top-level packages by their modules' self time:")
    for name, total_ms in packages:
        print(f"    {total_ms:8.1f} ms  {name}")
    print(f"  our own modules by cumulative import time (top {TOP}):")
    for name, (self_ms, cumulative_ms) in ours:
        print(f"    {cumulative_ms:8.1f} ms  (self {self_ms:6.1f})  {name}")
    print()
    return {
        "rounds_ms": [round(wall, 2) for wall in walls],
        "median_ms": round(median, 1),
        "min_ms": round(min(walls), 1),
        "max_ms": round(max(walls), 1),
        "cpu_median_ms": round(cpu_median, 1),
        "modules_loaded": len(times),
        "top_modules_cumulative_ms": [
            {"module": name, "cumulative_ms": round(c, 1), "self_ms": round(s, 1)} for name, (s, c) in top
        ],
        "top_packages_self_ms": [{"package": name, "self_ms": round(t, 1)} for name, t in packages],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="timed fresh interpreters (default 15)")
    parser.add_argument("--profile-runs", type=int, default=5, help="interpreters under -X importtime (default 5)")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.runs < 1 or args.profile_runs < 1:
        parser.error("--runs and --profile-runs must be at least 1")

    plain = report(IMPORT, args.runs, args.profile_runs)
    used = report(USE, args.runs, args.profile_runs)
    print(
        f"import agentlightning: median {plain['median_ms']:.0f} ms; plus first use: median {used['median_ms']:.0f} "
        f"ms (target < {TARGET_MS:.0f} ms)"
    )
    settings = {"runs": args.runs, "profile_runs": args.profile_runs}
    write_results(args.json, [import_figure(plain, settings), first_use_figure(used, settings)])


def import_figure(measured: dict[str, Any], settings: dict[str, Any]) -> Figure:
    """`import agentlightning` alone: the median of fresh interpreters, each one's time in `rounds`."""
    return _figure("import.median_ms", "import agentlightning (fresh interpreter, median)", measured, settings)


def first_use_figure(measured: dict[str, Any], settings: dict[str, Any]) -> Figure:
    """`import agentlightning` plus the first use of the names a training script touches next (`USE`)."""
    label = (
        "import agentlightning plus its first use (agl.Trainer, agl.rollout, agl.LLM, agl.emit_reward looked up, "
        "which loads their modules; fresh interpreter, median)"
    )
    return _figure("import.first_use_median_ms", label, measured, {**settings, "code": USE})


def _figure(key: str, label: str, measured: dict[str, Any], settings: dict[str, Any]) -> Figure:
    median = measured["median_ms"]
    detail = {**settings, **{name: value for name, value in measured.items() if name != "rounds_ms"}}
    return Figure(
        key=key,
        label=label,
        value=median,
        unit="ms",
        target=f"< {TARGET_MS:.0f} ms",
        met=median < TARGET_MS,
        higher_is_better=False,
        detail=detail,
        rounds=list(measured["rounds_ms"]),
    )


if __name__ == "__main__":
    main()
