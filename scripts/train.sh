#!/usr/bin/env bash
# Runs the main job in ./.venv (created or refreshed here). Until the trainer lands this is the store walkthrough.
source "$(dirname "$0")/_venv.sh" server
exec .venv/bin/agl demo "$@"
