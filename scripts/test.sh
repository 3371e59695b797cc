#!/usr/bin/env bash
# Runs the whole test suite in ./.venv (created or refreshed here). Extra arguments go to pytest.
#   bash scripts/test.sh                  # set up ./.venv when needed, then run every test
#   bash scripts/test.sh --setup-only     # only set up ./.venv (and Chromium for the dashboard tests)
#   bash scripts/test.sh tests/store -x   # set up when needed, then run pytest with these arguments
SETUP_ONLY=""
if [ "${1:-}" = "--setup-only" ]; then
    SETUP_ONLY=1
    shift
fi
source "$(dirname "$0")/_venv.sh" test
source "$ROOT/scripts/_chromium.sh"  # the dashboard's browser tests; never fails (they skip without it)
if [ -n "$SETUP_ONLY" ]; then
    echo "./.venv is set up for the tests: bash scripts/test.sh runs them" >&2
    exit 0
fi
if [ "$#" -eq 0 ]; then
    echo "Running the whole test suite: pytest first imports every test module (a few minutes on a small machine, silently), then shows its progress" >&2
fi
exec .venv/bin/python -m pytest "$@"
