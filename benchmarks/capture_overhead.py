"""Capture overhead: wall time of an agent making LLM calls with and without tracing.

The agent makes `--calls` sequential chat-completion calls with the OpenAI SDK against the local fake server
(tests/fake_openai_server.py, in its own process), grouped in rollouts of `--calls-per-rollout` calls. The traced
variant runs each rollout inside `OtelTracer(instrument=True).trace_context(...)` writing to an
InMemoryLightningStore (OpenInference instrumentation, token-id recorder, batched store writer, flush at the end of
every rollout). Baseline and traced rounds alternate; the median of `--rounds` rounds is reported.

Every traced round is checked: all `--calls` LLM spans stored, each with token ids, nothing dropped. The script
prints a verdict (the checks of every round, and the added wall time against `--target-pct`) and exits 1 when a
check fails or the target is missed. The 1-minute load average is printed beside the figures.

    .venv/bin/python benchmarks/capture_overhead.py --calls 1000 --rounds 5
    .venv/bin/python benchmarks/capture_overhead.py --calls 1000 --rounds 3 --server-delay-ms 20

`--json PATH` writes the added wall time (key `capture.delay_<ms>ms.added_wall_pct`) through benchmarks/_results.py;
`--print-json` prints the whole result as one JSON line instead of the text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Figure, add_json_argument, write_results  # noqa: E402

from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402

FLUSH_INTERVAL = 0.2

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
    {"role": "user", "content": "What is the capital of France? Explain in one sentence."},
]


async def run_agent(client: Any, calls: int) -> None:
    for _ in range(calls):
        response = await client.chat.completions.create(model="fake-model", messages=MESSAGES)
        assert response.choices[0].message.content


async def baseline_round(base_url: str, calls: int, per_rollout: int) -> tuple[float, float]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench")
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls // per_rollout):
        await run_agent(client, per_rollout)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await client.close()
    return elapsed, cpu


async def traced_round(base_url: str, calls: int, per_rollout: int) -> tuple[float, float, dict[str, Any]]:
    import openai

    import agentlightning as agl
    from agentlightning.store import InMemoryLightningStore

    store = InMemoryLightningStore()
    tracer = agl.OtelTracer(instrument=True, flush_interval=FLUSH_INTERVAL)
    tracer.init_worker(0, store)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench")
    rollouts = [await store.start_rollout(input=None) for _ in range(calls // per_rollout)]
    started, cpu = time.perf_counter(), time.process_time()
    for rollout in rollouts:
        async with tracer.trace_context(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id):
            await run_agent(client, per_rollout)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    stats = tracer.writer_stats()
    spans = [span for rollout in rollouts for span in await store.query_spans(rollout.rollout_id)]
    tracer.teardown_worker(0)
    await client.close()
    llm_spans = [span for span in spans if span.name == "openai.chat.completion"]
    with_ids = sum(1 for span in llm_spans if span.attributes.get("prompt_token_ids"))
    return (
        elapsed,
        cpu,
        {
            "llm_spans": len(llm_spans),
            "with_token_ids": with_ids,
            "store_batches": stats.batches if stats else 0,
            "dropped": stats.dropped if stats else 0,
        },
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--calls-per-rollout", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--server-delay-ms", type=float, default=0.0, help="simulated generation time per call")
    parser.add_argument("--flush-interval", type=float, default=0.2, help="OtelTracer flush_interval (seconds)")
    parser.add_argument("--target-pct", type=float, default=5.0, help="added wall time the verdict allows")
    parser.add_argument("--print-json", action="store_true", help="print the result as one JSON line")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.calls % args.calls_per_rollout:
        parser.error("--calls must be a multiple of --calls-per-rollout")

    global FLUSH_INTERVAL
    FLUSH_INTERVAL = args.flush_interval
    with FakeOpenAIServer(delay=args.server_delay_ms / 1000) as server:
        await baseline_round(server.base_url, 50, 10)  # warm-up: connections, imports
        await traced_round(server.base_url, 50, 10)
        baseline: list[float] = []
        traced: list[float] = []
        baseline_cpu: list[float] = []
        traced_cpu: list[float] = []
        checks: list[dict[str, Any]] = []
        for _ in range(args.rounds):
            elapsed, cpu = await baseline_round(server.base_url, args.calls, args.calls_per_rollout)
            baseline.append(elapsed)
            baseline_cpu.append(cpu)
            elapsed, cpu, check = await traced_round(server.base_url, args.calls, args.calls_per_rollout)
            checks.append(check)
            traced.append(elapsed)
            traced_cpu.append(cpu)

    base, trace = statistics.median(baseline), statistics.median(traced)
    base_cpu, trace_cpu = statistics.median(baseline_cpu), statistics.median(traced_cpu)
    result = {
        "calls": args.calls,
        "calls_per_rollout": args.calls_per_rollout,
        "server_delay_ms": args.server_delay_ms,
        "flush_interval": args.flush_interval,
        "rounds": args.rounds,
        "baseline_s": round(base, 3),
        "traced_s": round(trace, 3),
        "overhead_pct": round(100 * (trace - base) / base, 1),
        "per_call_overhead_us": round(1e6 * (trace - base) / args.calls, 1),
        "baseline_cpu_s": round(base_cpu, 3),
        "traced_cpu_s": round(trace_cpu, 3),
        "per_call_cpu_overhead_us": round(1e6 * (trace_cpu - base_cpu) / args.calls, 1),
        "baseline_rounds_s": [round(value, 3) for value in baseline],
        "traced_rounds_s": [round(value, 3) for value in traced],
        "round_checks": checks,
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }
    failures = [
        f"round {index + 1}: {check['llm_spans']} LLM spans, {check['with_token_ids']} with token ids, "
        f"{check['dropped']} dropped (expected {args.calls}, {args.calls}, 0)"
        for index, check in enumerate(checks)
        if (check["llm_spans"], check["with_token_ids"], check["dropped"]) != (args.calls, args.calls, 0)
    ]
    result["checks_passed"] = not failures
    result["target_met"] = result["overhead_pct"] < args.target_pct
    delay = f"{args.server_delay_ms:g}"
    figure = Figure(
        key=f"capture.delay_{delay}ms.added_wall_pct",
        label=f"capture: added wall time, {args.calls:,} calls of {delay} ms server time, every span stored",
        value=result["overhead_pct"],
        unit="%",
        target=f"< {args.target_pct:g} %",
        met=result["target_met"] and not failures,
        higher_is_better=False,
        detail={key: result[key] for key in ("baseline_s", "traced_s", "per_call_overhead_us", "rounds")}
        | {key: result[key] for key in ("baseline_rounds_s", "traced_rounds_s")}
        | {"checks_passed": not failures},
        rounds=[round(100 * (t - b) / b, 1) for b, t in zip(baseline, traced, strict=True)],
    )
    write_results(args.json, [figure])
    if args.print_json:
        print(json.dumps(result))
        return 0 if not failures and result["target_met"] else 1
    print(
        f"{args.calls} calls, rollouts of {args.calls_per_rollout}, median of {args.rounds} rounds, "
        f"server delay {args.server_delay_ms} ms, flush_interval {args.flush_interval} s"
    )
    print(f"  baseline (no tracing):        {base:.3f} s  {result['baseline_rounds_s']}")
    print(f"  traced (OtelTracer + store):  {trace:.3f} s  {result['traced_rounds_s']}")
    print(f"  added wall time:              {result['overhead_pct']} %  ({result['per_call_overhead_us']} us per call)")
    print(
        f"  client CPU (all threads):     {base_cpu:.3f} s -> {trace_cpu:.3f} s  "
        f"(+{result['per_call_cpu_overhead_us']} us per call)"
    )
    for index, check in enumerate(checks):
        print(
            f"  round {index + 1} check: {check['llm_spans']} LLM spans stored, {check['with_token_ids']} with token "
            f"ids, {check['store_batches']} store batches, {check['dropped']} dropped"
        )
    print(f"  load average: {result['load_average']}")
    if failures:
        print("VERDICT: FAILED - spans missing in " + "; ".join(failures))
        return 1
    verdict = "met" if result["target_met"] else "NOT met"
    print(
        f"VERDICT: every round stored all {args.calls} LLM spans with token ids; added wall time "
        f"{result['overhead_pct']} % - target < {args.target_pct} % {verdict}"
    )
    return 0  # a missed target is a figure (in the verdict and --json), not a failure of the run


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
