#!/usr/bin/env bash
# The whole GPU run on a bare GPU machine: install the carried wheels, run the GPU tests,
# the demo and benchmarks/bench_gpu.py, and print a summary table per precision.
# Usage (from the repo root, with .whl/ made by scripts/fetch_wheels.sh):
#   bash scripts/gpu_run.sh [pytest args...]
# BLASDX_SKIP_BENCH=1 skips the benchmark; BLASDX_AB_BASE=DIR runs it through benchmarks/ab.py
# against the tree in DIR (made here by `python benchmarks/ab.py --base REV --export DIR`).
set -uo pipefail
OUT=${OUT:-/tmp/blasdx-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m blasdx config
python3 -m pytest tests -m gpu -q -n 8 -p no:cacheprovider --junitxml="$OUT/gpu-junit.xml" "$@" 2>&1 | tee "$OUT/gpu-tests.log" | tail -n 60
python3 scripts/gpu_summary.py "$OUT/gpu-junit.xml"
if [ -n "${BLASDX_SKIP_BENCH:-}" ]; then
  :
elif [ -n "${BLASDX_AB_BASE:-}" ]; then
  python3 benchmarks/ab.py --base "$BLASDX_AB_BASE" --out "$OUT/ab.json" -- benchmarks/bench_gpu.py 2>&1 \
    | tee "$OUT/ab.log" | tail -n 60
else
  python3 benchmarks/bench_gpu.py --out "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -n 20
fi
python3 -m blasdx demo
