#!/usr/bin/env bash
# Regenerate the record from an empty cache, apart from the committed one, and compare the two:
# a git worktree of HEAD at DIR (default ../regen) without the record's submissions, in which
# `xaibench record build` computes every explainer (niced; resumable: run this again after a kill
# or a reboot, it computes what is missing), then bench/record_compare.py compares each finished
# submission with the committed one value by value. The build's log: DIR.log.
#
#   bench/record_regenerate.sh [DIR] [DATA_DIR]      # start or resume (in the background)
#   bench/record_regenerate.sh --compare [DIR]       # compare what is finished
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" = "--compare" ]; then
  dir=${2:-$here/../regen}
  exec "$here/.venv/bin/python" "$here/bench/record_compare.py" "$here/record/record-v1/submissions" \
    "$dir/record/record-v1/submissions"
fi
dir=${1:-$here/../regen}
data=${2:-$(cd "$here/.." && pwd)/shared/data}
if [ ! -d "$dir" ]; then
  git -C "$here" worktree add -q --detach "$dir" HEAD
  rm -rf "$dir/record/record-v1/submissions" && mkdir -p "$dir/record/record-v1/submissions"
fi
cd "$dir"
export HF_HUB_OFFLINE=1 PYTHONPATH="$dir:$(ls -d "$dir"/plugins/*/ | tr '\n' ':')"
nohup nice -n 19 "$here/.venv/bin/python" -m xaibench record build --data-dir "$data" --timeout 1200 --quiet \
  >> "$dir.log" 2>&1 &
echo "regenerating the record in $dir (pid $!), log $dir.log"
