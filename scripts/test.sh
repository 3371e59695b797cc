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
    # The whole suite runs on two worker processes (AGL_TEST_WORKERS=N for another count, 0 for none); the tests
    # of a group marked in tests/conftest.py stay on one worker.
    WORKERS="${AGL_TEST_WORKERS:-2}"
    echo "Running the whole test suite on $WORKERS workers: each first imports every test module (a few minutes on a small machine, silently), then pytest shows its progress" >&2
    if [ "$WORKERS" != "0" ]; then
        set -- -n "$WORKERS" --dist loadgroup
    fi
fi
exec .venv/bin/python -m pytest "$@"
