#!/usr/bin/env bash
# Why a kernel's warps wait: ncu's stall reasons (cycles per issued instruction,
# by reason) and issue activity on one svd_smem_kernel launch of each CASE
# (scripts/ncu_case.py; the 5th launch, a queued pair sweep at the blocked
# level). usage: scripts/probe_stalls.sh 200x256x256 [100x512x512 ...]; logs under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD OUT=${OUT:-$PWD/gpu_logs}
mkdir -p "$OUT"
for case in "$@"; do
  ncu --kernel-name regex:svd_smem_kernel --launch-skip 4 --launch-count 1 \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active,gpu__time_duration.sum" \
    python3 scripts/ncu_case.py "$case" > "$OUT/stalls_${case}.txt" 2>&1
  echo "== $case"
  grep -E "issue_active|warps_active|duration|stalled" "$OUT/stalls_${case}.txt" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' \
    | awk '{print $1, $NF}' | sort -k2 -g -r | head -14
done
