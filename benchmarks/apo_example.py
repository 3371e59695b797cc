"""APO measured on a real model: the topic agent of examples/apo with SmolLM2-135M-Instruct, end to end.

Runs `examples/apo/train_apo.py` with fixed, bounded settings (seed 0, 2 rounds, beam 2 x branch 2, gradient batches
of 4, validation batches of 8, 2 runner processes) once per optimizer — SmolLM2-135M-Instruct itself, then the
rule-based scripted optimizer endpoint — and prints the figures recorded in docs/benchmarks.md: validation and test
accuracy of the seed and of the best prompt, rollouts, optimizer calls, skipped candidates and wall time. Summaries,
plots and the optimizer's critiques go to `--out/<optimizer>/`.

    .venv/bin/python benchmarks/apo_example.py [--optimizer model|scripted|both] [--out DIR]

Endpoints can be redirected with the environment variables that train_apo.py documents.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "apo" / "train_apo.py"
SETTINGS = [
    "--seed", "0", "--rounds", "2", "--beam-width", "2", "--branch-factor", "2",
    "--gradient-batch-size", "4", "--val-batch-size", "8", "--runners", "2", "--optimizer-max-tokens", "300",
]  # fmt: skip


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("apo_train_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimizer", choices=["model", "scripted", "both"], default="both")
    parser.add_argument("--out", type=Path, default=Path("apo-benchmark"))
    args = parser.parse_args()
    example = load_example()
    example.logging.basicConfig(level=example.logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    example.logging.getLogger("httpx").setLevel(example.logging.WARNING)
    rows = []
    for optimizer in ("model", "scripted") if args.optimizer == "both" else (args.optimizer,):
        started = time.monotonic()
        summary = example.run(
            example.parse_args([*SETTINGS, "--optimizer", optimizer, "--out", str(args.out / optimizer)])
        )
        summary["total_seconds"] = round(time.monotonic() - started, 1)
        rows.append((optimizer, summary))
    print()
    print("| optimizer | val seed | val best | test seed | test best | rollouts (reused) | optimizer calls (failed) "
          "| candidates accepted / proposed | skipped | fit s | total s |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for optimizer, summary in rows:
        stats = summary["stats"]
        name = "SmolLM2-135M-Instruct" if optimizer == "model" else "scripted"
        skipped = ", ".join(f"{count} {reason}" for reason, count in sorted(stats["skipped"].items())) or "none"
        print(
            f"| {name} | {summary['val_seed']:.3f} | {summary['val_best']:.3f} | {summary['test_seed']:.3f} | "
            f"{summary['test_best']:.3f} | {stats['rollouts_enqueued']} ({stats['rollouts_reused']}) | "
            f"{stats['llm_calls']} ({stats['llm_failures']}) | {stats['candidates_accepted']} / "
            f"{stats['candidates_proposed']} | {skipped} | {summary['fit_seconds']} | {summary['total_seconds']} |"
        )
    for optimizer, summary in rows:
        print(f"\n[{optimizer}] best prompt ({summary['best_version']}):\n{summary['best_prompt']}")
        for entry in summary["edit_log"][:2]:
            print(f"\n[{optimizer}] critique of {entry['parent']} (verdict: {entry['verdict']}):")
            print(json.dumps(entry["critique"])[:1200])
            print(f"[{optimizer}] rewrite: {json.dumps(entry['rewrite'])[:800]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
