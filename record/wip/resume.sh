#!/usr/bin/env bash
# Recreate the build's worktree from main and record/wip, then start the build in the
# background (see record/wip/README.md). Usage: record/wip/resume.sh [worktree] [data dir] [log]
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build=${1:-/work/recordwt}
data=${2:-$(cd "$here/.." && pwd)/shared/data}
log=${3:-$build.log}
suite=record-v1
if [ ! -d "$build" ]; then
  git -C "$here" worktree add -q -b "record256-$(date +%s)" "$build" HEAD
  # the 256-sample pins: 84f3eaa's change to the suite and its test, undone (its record files are
  # replaced below by the saved submissions, and the board is rebuilt when the record lands)
  git -C "$here" diff 84f3eaa 84f3eaa~1 -- xaibench/suites/record.py tests/test_record_build.py | git -C "$build" apply
fi
cp -r "$here/record/wip/$suite/submissions/." "$build/record/$suite/submissions/"
cd "$build"
export HF_HUB_OFFLINE=1 PYTHONPATH="$build:$(ls -d "$build"/plugins/*/ | tr '\n' ':')"
order="rise,all"
nohup "$here/.venv/bin/python" -m xaibench record build -e "$order" --data-dir "$data" --timeout 1200 --quiet \
  > "$log" 2>&1 &
echo "build started in $build (pid $!), log $log"
