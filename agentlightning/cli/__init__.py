"""The `agl` command line. Each subcommand lives in its own module, imported only when it runs."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Optional

# name -> (module, one-line help). Each module defines `main(argv: List[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("agentlightning.cli.demo", "walk through the store: enqueue, dequeue, spans, resources, retries"),
    "store": ("agentlightning.cli.store", "serve a LightningStore over HTTP"),
    "serve": ("agentlightning.cli.serve", "serve a local model with an OpenAI/vLLM-compatible API"),
    "runner": ("agentlightning.cli.runner", "run an agent on the rollouts of a store (scale out to other machines)"),
    "dashboard": ("agentlightning.cli.dashboard", "watch a store's rollouts, traces and runners in the browser"),
    "export": ("agentlightning.cli.export", "write a store's captured calls as SFT, RL or preference data"),
}


def _usage() -> str:
    lines = ["usage: agl <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_text}" for name, (_, help_text) in SUBCOMMANDS.items()]
    lines += ["", "Run `agl <command> --help` for the options of a command."]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    entry = SUBCOMMANDS.get(name)
    if entry is None:
        print(f"agl: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        module = import_module(entry[0])
    except ImportError as exc:
        print(f"agl {name}: this command is not available ({exc})", file=sys.stderr)
        return 1
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
