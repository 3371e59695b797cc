"""Latency the LLM proxy adds per call, streaming and not.

A minimal OpenAI-compatible upstream and the proxy (with an in-memory store) run in their own processes; this
process sends the same requests directly to the upstream and through the proxy, one at a time, and compares the
p50/p99 latencies.

Usage:
    python benchmarks/proxy_latency.py [--requests 2000] [--warmup 200] [--json out.json]

`--json PATH` writes the p50 each mode adds (target: <= 2 ms) through benchmarks/_results.py.
"""

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _results import Figure, add_json_argument, write_results

RESPONSE = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 1,
    "model": "bench",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hello there"}, "finish_reason": "stop",
         "token_ids": [11, 12, 13]}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    "prompt_token_ids": [1, 2, 3, 4, 5],
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_upstream(port: int) -> None:
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import StreamingResponse

    app = FastAPI()
    body = json.dumps(RESPONSE).encode()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        payload = await request.json()
        if payload.get("stream"):

            async def events() -> Any:
                head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "bench"}
                yield f"data: {json.dumps({**head, 'prompt_token_ids': [1, 2, 3], 'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': ''}}]})}\n\n"
                for token, text in ((11, "hello"), (12, " there"), (13, "!")):
                    chunk = {**head, "choices": [{"index": 0, "delta": {"content": text}, "token_ids": [token]}]}
                    yield f"data: {json.dumps(chunk)}\n\n"
                yield f"data: {json.dumps({**head, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]})}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        from fastapi.responses import Response

        return Response(body, media_type="application/json")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


def serve_proxy(port: int, upstream_port: int) -> None:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store import InMemoryLightningStore

    store = InMemoryLightningStore()
    attempted = asyncio.run(store.start_rollout("bench"))
    proxy = LLMProxy(
        port=port,
        store=store,
        model_list=[
            {
                "model_name": "bench",
                "litellm_params": {"model": "bench", "api_base": f"http://127.0.0.1:{upstream_port}/v1"},
            }
        ],
    )
    proxy.start()
    print(json.dumps({"rollout_id": attempted.rollout_id, "attempt_id": attempted.attempt.attempt_id}), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        proxy.stop()


def wait_ready(url: str) -> None:
    import httpx

    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def measure(client: Any, url: str, stream: bool, count: int) -> list[float]:
    payload = {"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        if stream:
            with client.stream("POST", url, json=payload) as response:
                for _line in response.iter_lines():
                    pass
        else:
            response = client.post(url, json=payload)
            response.read()
        assert response.status_code == 200, response.text
        samples.append(time.perf_counter() - start)
    return samples


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(round(fraction * (len(ordered) - 1)), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-proxy", nargs=2, type=int, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return
    if args.serve_proxy:
        serve_proxy(*args.serve_proxy)
        return

    import httpx

    upstream_port, proxy_port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, __file__, "--serve-upstream", str(upstream_port)])
    proxy = subprocess.Popen(
        [sys.executable, __file__, "--serve-proxy", str(proxy_port), str(upstream_port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_ready(f"http://127.0.0.1:{upstream_port}/docs")
        assert proxy.stdout is not None
        ids = json.loads(proxy.stdout.readline())
        direct = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"
        proxied = (
            f"http://127.0.0.1:{proxy_port}/rollout/{ids['rollout_id']}/attempt/{ids['attempt_id']}/v1/chat/completions"
        )
        print(f"{'mode':<11}{'path':<8}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
        figures: list[Figure] = []
        with httpx.Client(timeout=30) as client:
            for stream in (False, True):
                label = "streaming" if stream else "plain"
                measure(client, direct, stream, args.warmup)
                measure(client, proxied, stream, args.warmup)
                rows = {
                    name: measure(client, url, stream, args.requests)
                    for name, url in (("direct", direct), ("proxy", proxied))
                }
                for name, samples in rows.items():
                    print(
                        f"{label:<11}{name:<8}{percentile(samples, 0.5) * 1e3:>9.2f}{percentile(samples, 0.99) * 1e3:>9.2f}"
                        f"{statistics.mean(samples) * 1e3:>9.2f}"
                    )
                added50 = (percentile(rows["proxy"], 0.5) - percentile(rows["direct"], 0.5)) * 1e3
                added99 = (percentile(rows["proxy"], 0.99) - percentile(rows["direct"], 0.99)) * 1e3
                print(f"{label:<11}{'added':<8}{added50:>9.2f}{added99:>9.2f}")
                figures.append(
                    Figure(
                        key=f"proxy.{label}.added_p50_ms",
                        label=f"LLM proxy: latency added per call, {label}, p50",
                        value=round(added50, 2),
                        unit="ms",
                        target="<= 2 ms",
                        met=added50 <= 2,
                        higher_is_better=False,
                        detail={
                            "requests": args.requests,
                            "added_p99_ms": round(added99, 2),
                            "direct_p50_ms": round(percentile(rows["direct"], 0.5) * 1e3, 2),
                        },
                    )
                )
        write_results(args.json, figures)
    finally:
        proxy.terminate()
        upstream.terminate()
        proxy.wait()
        upstream.wait()


if __name__ == "__main__":
    main()
