#!/usr/bin/env bash
# Nsight Compute counters of the 64^3 float32 FMA block GEMM, old order against v12's
# micro-tiles (benchmarks/RESULTS.md v12): shared-memory wavefronts and bank conflicts,
# FMA pipe and issue activity, stall reasons. Run from the repo root on the GPU machine
# after scripts/gpu_run.sh has installed the wheels (ncu locks the clocks at base).
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD
M=l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed_op_shared_ld.sum
M=$M,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
M=$M,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__warps_active.avg.per_cycle_active
M=$M,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio
for variant in "4x4 x256 rows" "4x4 x256 pairs" "8x4 x128 pairs" "8x4 x128 pairs, 2 groups"; do
  echo "== $variant"
  ncu --kernel-name repeat_gemm --launch-skip 1 --launch-count 1 --metrics "$M" \
    python3 benchmarks/ablate_fma.py --profile "$variant" 2>&1 | grep -E "^ +[a-z0-9_]+__" | sed -E 's/ +/ /g'
done
