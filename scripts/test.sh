#!/usr/bin/env bash
# Runs the whole test suite in ./.venv (created or refreshed here). Extra arguments go to pytest.
source "$(dirname "$0")/_venv.sh" test
source "$ROOT/scripts/_chromium.sh"  # the dashboard's browser tests; never fails (they skip without it)
exec .venv/bin/python -m pytest "$@"
