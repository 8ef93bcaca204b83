#!/usr/bin/env bash
# Regenerate the record from an empty cache, apart from the committed one, and compare the two:
# a git worktree of HEAD at DIR (default ../regen) without the record's submissions and validity
# tests, in which `xaibench record build` computes every explainer and then `xaibench record
# board --tests` the validity tests, meta and board, as `make record` does (niced; resumable: run
# this again after a kill or a reboot, it computes what is missing); bench/record_compare.py
# compares each finished submission, and the validity tests, with the committed ones value by
# value. The log: DIR.log (bench/record_times.py reads each explainer's time from it).
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
  rm -rf "$dir/record/record-v1/submissions" "$dir/record/record-v1/meta/validity.json"
  mkdir -p "$dir/record/record-v1/submissions"
fi
cd "$dir"
export HF_HUB_OFFLINE=1 PYTHONPATH="$dir:$(ls -d "$dir"/plugins/*/ | tr '\n' ':')"
py="$here/.venv/bin/python"
nohup nice -n 19 bash -c "
  '$py' -m xaibench record build --data-dir '$data' --timeout 1200 --quiet &&
  start=\$(date +%s) &&
  '$py' -m xaibench record board --tests --no-bundle --data-dir '$data' --timeout 1200 --quiet &&
  echo \"validity tests and board done in \$(( \$(date +%s) - start )) s\"
" >> "$dir.log" 2>&1 &
echo "regenerating the record in $dir (pid $!), log $dir.log"
