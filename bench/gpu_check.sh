#!/usr/bin/env bash
# Every GPU check of issue 29 in one command; see bench/gpu_check.py and docs/gpu.md.
#   bench/gpu_check.sh [--out gpu_check.json] [--only STEP] [--dry-run]
# PYTHON overrides the interpreter (default: the repository's .venv/bin/python).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export HF_HUB_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0
# this tree's library and plugins first, whatever the environment has installed
path="${root}"
for plugin in "${root}"/plugins/xaibench-*/; do path="${path}:${plugin%/}"; done
export PYTHONPATH="${path}${PYTHONPATH:+:${PYTHONPATH}}"
exec "${PYTHON:-${root}/.venv/bin/python}" "${root}/bench/gpu_check.py" "$@"
