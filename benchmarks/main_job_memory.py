"""Peak memory of the main job, per process and in total, counted as PSS (shared pages once), with its held-out gain.

    .venv/bin/python benchmarks/main_job_memory.py                    # 3 minutes of training, 8 runners
    .venv/bin/python benchmarks/main_job_memory.py --minutes 6 --json out/memory.json
    .venv/bin/python benchmarks/main_job_memory.py --max-steps 2 --tiny    # a smoke run (tiny random model)

Runs `examples/arithmetic_rl/train.py --fresh --no-live` (the command behind `bash scripts/train.sh`) into a
temporary run directory and, every `--interval` seconds, reads `/proc/PID/smaps_rollup` of every process of the
job's process tree. PSS (proportional set size) charges a page shared by n processes 1/n to each of them, so the sum
over the tree counts the shared libraries and the copy-on-write pages once; RSS summed over processes counts them
once per process. Reports the peak of the summed PSS, each process's own peak PSS with its role (the trainer
process holds the algorithm, the store server, the inference server and the LLM proxy on threads; runner
processes name themselves `agl-runner-N`), the summed RSS at the PSS peak for comparison, and the run's held-out
accuracy gain from its summary.json, so a memory reduction is shown beside the same figures of merit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Figure, add_json_argument, load_average, write_results

ROOT = Path(__file__).resolve().parents[1]
TARGET_MB = 2500.0


@dataclass
class ProcessPeak:
    """The largest PSS one process reached, and what it was."""

    pid: int
    role: str
    peak_pss_mb: float = 0.0
    peak_rss_mb: float = 0.0
    modules: list[str] = field(default_factory=list)


@dataclass
class Sample:
    """One reading of the whole tree."""

    seconds: float
    total_pss_mb: float
    total_rss_mb: float
    processes: int


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from the parent pid in /proc/PID/stat."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name (field 2) is parenthesised and may hold spaces or parentheses: parse after the last ')'.
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(parent, []).append(int(entry))
    return tree


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants that are alive now."""
    tree = children_by_parent()
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(tree.get(pid, []))
    return found


def memory_kb(pid: int) -> Optional[tuple[int, int]]:
    """(PSS, RSS) of a process in kB from /proc/PID/smaps_rollup, or None when it is gone."""
    pss = rss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        return None
    if pss is None or rss is None:
        return None
    return pss, rss


def role_of(pid: int, root: int) -> str:
    """What a process of the job is, from its name and command line."""
    if pid == root:
        return "trainer (algorithm, store server, inference server, LLM proxy)"
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if name.startswith("agl-runner-"):
        return f"runner {name.removeprefix('agl-runner-')}"
    if "resource_tracker" in command:
        return "multiprocessing resource tracker"
    if "spawn_main" in command:
        return "spawned process (starting)"
    return f"other ({name})"


def mapped_libraries(pid: int) -> list[str]:
    """The notable shared libraries a process has mapped (torch, CUDA, ...), from /proc/PID/maps."""
    markers = ("libtorch", "libc10", "libgomp", "libmkl", "libopenblas", "tokenizers", "safetensors", "numpy")
    found: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                for marker in markers:
                    if marker in path:
                        found.add(marker)
    except OSError:
        pass
    return sorted(found)


class Sampler:
    """Reads the tree's memory every `interval` seconds on a thread until `stop()`."""

    def __init__(self, root: int, interval: float) -> None:
        self.root = root
        self.interval = interval
        self.samples: list[Sample] = []
        self.peaks: dict[int, ProcessPeak] = {}
        self.rss_at_peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)
        self._started = time.monotonic()

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        total_pss = total_rss = 0
        count = 0
        for pid in process_tree(self.root):
            reading = memory_kb(pid)
            if reading is None:
                continue
            pss, rss = reading
            total_pss += pss
            total_rss += rss
            count += 1
            peak = self.peaks.get(pid)
            role = role_of(pid, self.root)
            if peak is None:
                peak = self.peaks[pid] = ProcessPeak(pid, role)
            elif role != "gone" and not role.startswith("spawned"):
                peak.role = role
            if pss / 1024 > peak.peak_pss_mb:
                peak.peak_pss_mb = pss / 1024
                peak.peak_rss_mb = rss / 1024
                peak.modules = mapped_libraries(pid)
        if not count:
            return
        self.samples.append(Sample(time.monotonic() - self._started, total_pss / 1024, total_rss / 1024, count))

    @property
    def peak(self) -> Sample:
        return max(self.samples, key=lambda s: s.total_pss_mb)


def run_job(args: argparse.Namespace, run_dir: Path) -> tuple[Sampler, int, float]:
    command = [
        sys.executable,
        str(ROOT / "examples" / "arithmetic_rl" / "train.py"),
        "--fresh",
        "--no-live",
        "--seed",
        str(args.seed),
        "--minutes",
        str(args.minutes),
        "--runners",
        str(args.runners),
        "--run-dir",
        str(run_dir),
    ]
    if args.max_steps is not None:
        command += ["--max-steps", str(args.max_steps)]
    if args.tiny:
        command.append("--tiny")
    print("$", " ".join(command), flush=True)
    started = time.monotonic()
    job = subprocess.Popen(command, cwd=ROOT)
    sampler = Sampler(job.pid, args.interval).start()
    try:
        code = job.wait()
    finally:
        sampler.stop()
    return sampler, code, time.monotonic() - started


def timeline(samples: list[Sample], every_seconds: float) -> list[list[float]]:
    """[seconds, total PSS MB] at most every `every_seconds` (the largest reading of each interval)."""
    buckets: dict[int, Sample] = {}
    for sample in samples:
        key = int(sample.seconds // every_seconds)
        if key not in buckets or sample.total_pss_mb > buckets[key].total_pss_mb:
            buckets[key] = sample
    return [[round(s.seconds), round(s.total_pss_mb)] for _, s in sorted(buckets.items())]


def held_out_gain(run_dir: Path) -> dict[str, Any]:
    """The run's held-out accuracy before/after and its gain, from summary.json ({} when the run wrote none)."""
    path = run_dir / "summary.json"
    if not path.exists():
        return {}
    summary = json.loads(path.read_text())
    return {
        "held_out_accuracy": summary["held_out_accuracy"],
        "gain": summary["gain"],
        "steps": summary["steps"],
        "wall_seconds": summary["wall_seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=3.0, help="training budget of the run (default 3)")
    parser.add_argument("--max-steps", type=int, default=None, help="also stop after this many GRPO steps")
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between readings (default 0.5)")
    parser.add_argument("--tiny", action="store_true", help="the tiny random model (a smoke run, not the figure)")
    parser.add_argument("--keep", type=Path, default=None, help="run directory to keep (default: a temporary one)")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.minutes <= 0 or args.interval <= 0 or args.runners < 1:
        parser.error("--minutes and --interval must be positive and --runners at least 1")

    with tempfile.TemporaryDirectory(prefix="agl-memory-") as scratch:
        run_dir = args.keep or Path(scratch) / "run"
        sampler, code, wall = run_job(args, run_dir)
        figures_of_merit = held_out_gain(run_dir)
    if not sampler.samples:
        raise SystemExit("no memory reading was taken (the job ended at once?)")
    if code != 0:
        print(f"warning: the job exited with code {code}", file=sys.stderr)

    peak = sampler.peak
    processes = sorted(sampler.peaks.values(), key=lambda p: (-p.peak_pss_mb, p.pid))
    print(
        f"\npeak total PSS {peak.total_pss_mb:.0f} MB at {peak.seconds:.0f} s over {peak.processes} processes "
        f"(summed RSS then {peak.total_rss_mb:.0f} MB; target < {TARGET_MB:,.0f} MB); "
        f"{len(sampler.samples)} readings over {wall:.0f} s, load average {load_average()}"
    )
    print(f"{'pid':>8}  {'peak PSS MB':>11}  {'its RSS MB':>10}  role / notable libraries mapped")
    for process in processes:
        libraries = ", ".join(process.modules) or "-"
        print(
            f"{process.pid:>8}  {process.peak_pss_mb:>11.0f}  {process.peak_rss_mb:>10.0f}  {process.role}  [{libraries}]"
        )
    gain = figures_of_merit.get("gain", {})
    print(f"held-out gain: {gain or 'n/a (no summary.json)'}")

    detail = {
        "minutes": args.minutes,
        "runners": args.runners,
        "seed": args.seed,
        "tiny": args.tiny,
        "exit_code": code,
        "readings": len(sampler.samples),
        "peak_at_seconds": round(peak.seconds, 1),
        "summed_rss_at_peak_mb": round(peak.total_rss_mb),
        "timeline_total_pss_mb": timeline(sampler.samples, every_seconds=10.0),
        "processes_at_peak": peak.processes,
        "per_process": [
            {
                "role": p.role,
                "peak_pss_mb": round(p.peak_pss_mb),
                "peak_rss_mb": round(p.peak_rss_mb),
                "libraries": p.modules,
            }
            for p in processes
        ],
        **figures_of_merit,
    }
    write_results(
        args.json,
        [
            Figure(
                key="memory.main_job_peak_pss_mb",
                label="Main job peak memory (total PSS over its processes, 8 runners)",
                value=round(peak.total_pss_mb),
                unit="MB",
                target=f"< {TARGET_MB:,.0f} MB",
                met=peak.total_pss_mb < TARGET_MB,
                higher_is_better=False,
                detail=detail,
            )
        ],
    )


if __name__ == "__main__":
    main()
