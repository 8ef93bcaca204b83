#!/usr/bin/env bash
# Copy what the record build in a worktree (default /work/recordwt, branch record256) has
# recomputed since main's record (each submission that differs, with its overlays) into
# record/wip/<suite>/ of this checkout, and the build logs given after them (each explainer's
# wall time; worker chatter left out) into record/wip/<suite>/logs/. See record/wip/README.md.
# Usage: record/wip/save.sh [worktree] [suite] [log ...]
set -euo pipefail
build=${1:-/work/recordwt}
suite=${2:-record-v1}
shift $(( $# > 2 ? 2 : $# ))
here="$(cd "$(dirname "$0")/../.." && pwd)"
src="$build/record/$suite/submissions"
dst="$here/record/wip/$suite/submissions"
mkdir -p "$dst/assets"
# a submission of another explainer version than the installed one is stale: the build redoes it
stale=$(cd "$build" && HF_HUB_OFFLINE=1 PYTHONPATH="$build:$(ls -d "$build"/plugins/*/ | tr '\n' ':')" \
  "$here/.venv/bin/python" - "$src" <<'PY'
import json, sys
from pathlib import Path
from xaibench.plugins.manager import get_registry
registry = get_registry()
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    block = json.loads(path.read_text(encoding="utf-8"))["explainer"]
    if block["version"] != registry.info("explainer", block["name"]).version:
        print(path.stem)
PY
)
for f in "$src"/*.json; do
  name=$(basename "$f" .json)
  committed="$here/record/$suite/submissions/$name.json"
  if [ -f "$committed" ] && cmp -s "$f" "$committed"; then continue; fi
  if grep -qx "$name" <<< "$stale"; then echo "stale $name (another explainer version): not saved"; continue; fi
  cp "$f" "$dst/"
  rm -rf "$dst/assets/$name@"*
  for a in "$src/assets/$name@"*; do [ -d "$a" ] && cp -r "$a" "$dst/assets/"; done
  echo "saved $name"
done
mkdir -p "$here/record/wip/$suite/logs"
for log in "$@"; do
  grep -v '^\[worker\]' "$log" > "$here/record/wip/$suite/logs/$(basename "$log")" || true
  echo "saved log $(basename "$log")"
done
