#!/usr/bin/env bash
# The whole GPU run on a bare GPU machine: install the carried wheels, run the GPU tests,
# the demo and the benchmarks, and print a summary table per precision last.
# Usage (from the repo root, with .whl/ made by scripts/fetch_wheels.sh):
#   bash scripts/gpu_run.sh [pytest args...]
set -uo pipefail
OUT=${OUT:-/tmp/blasdx-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m blasdx config
python3 -m pytest tests -m gpu -q -n 8 -p no:cacheprovider --junitxml="$OUT/gpu-junit.xml" "$@" 2>&1 | tee "$OUT/gpu-tests.log" | tail -n 60
python3 scripts/gpu_summary.py "$OUT/gpu-junit.xml"
if [ -z "${BLASDX_SKIP_BENCH:-}" ]; then
  python3 benchmarks/bench_gpu.py --out "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -n 20
fi
python3 -m blasdx demo
