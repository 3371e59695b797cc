#!/usr/bin/env bash
# Runs the main job in ./.venv (created or refreshed here). Until the trainer lands this is the store walkthrough.
# The store is an SQLite file in the working directory (the repository root): agl-demo.db. Each run starts it
# afresh and leaves it behind for inspection (sqlite3 agl-demo.db, or `agl demo --store URL` to use another store;
# a later --store argument overrides this default).
source "$(dirname "$0")/_venv.sh" server
STORE_FILE="agl-demo.db"
rm -f "$STORE_FILE" "$STORE_FILE-wal" "$STORE_FILE-shm"
exec .venv/bin/agl demo --store "sqlite:///$STORE_FILE" "$@"
