#!/usr/bin/env bash
# Where a block-pair sweep's time goes, in one GPU call (after a build): ncu's
# warp-state and throughput sections on one queued pair launch of CASE, and
# the case timed at a few pair widths and with/without register steps.
# usage: scripts/probe_pairs.sh [CASE] (default 200x256x256); logs under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD OUT=${OUT:-$PWD/gpu_logs}
case=${1:-200x256x256}
ncu --kernel-name regex:svd_smem_kernel --launch-skip 4 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section InstructionStats python3 scripts/ncu_case.py "$case" > "$OUT/ncu_${case}.txt" 2>&1
grep -E "Duration|Registers|Shared Memory Config|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Stall|Block Limit|DRAM Throughput|L1/TEX Hit|Mem Pipes|Executed Ipc A|Compute \(SM\)|Memory Throughput|Grid Size|Block Size" "$OUT/ncu_${case}.txt" | head -60
for w in 0 8 32; do
  for rs in 1 0; do
    echo "width=$w regsteps=$rs: $(JSVD_PAIR_WIDTH=$w JSVD_REG_STEPS=$rs python3 scripts/measure.py ${case}:float32 --reps 3)"
  done
done
