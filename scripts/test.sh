#!/usr/bin/env bash
# Runs the whole test suite in ./.venv (created or refreshed here). Extra arguments go to pytest.
source "$(dirname "$0")/_venv.sh" test
exec .venv/bin/python -m pytest "$@"
