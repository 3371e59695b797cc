# Shared by the scripts: create or refresh ./.venv and install the project with the given extras.
# Usage: source scripts/_venv.sh <extras>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet -e ".[$1]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import agentlightning" || { echo "installation of agentlightning failed" >&2; exit 1; }
