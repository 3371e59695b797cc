"""How long `import agentlightning` takes in a fresh interpreter (median of several runs).

Usage:
    python benchmarks/import_time.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CODE = "import time; t = time.perf_counter(); import agentlightning; print(time.perf_counter() - t)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-c", "import agentlightning"], check=True)  # warm the file cache
    samples = [
        float(subprocess.run([sys.executable, "-c", CODE], check=True, capture_output=True, text=True).stdout)
        for _ in range(args.runs)
    ]
    print(
        f"import agentlightning: median {statistics.median(samples) * 1000:.0f} ms, "
        f"min {min(samples) * 1000:.0f} ms, max {max(samples) * 1000:.0f} ms over {args.runs} runs"
    )


if __name__ == "__main__":
    main()
