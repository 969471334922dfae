#!/usr/bin/env bash
# The blocked levels after a change to them, in one GPU call: build, the CUDA
# tests, both sanitizers on the block-pair cases, and the blocked benchmark
# cases timed with scripts/measure.py. Logs under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD OUT=${OUT:-$PWD/gpu_logs}
bash scripts/gpu_check.sh build test 2>&1 | tail -3
{ JSVD_SANITIZE_ONLY=pair,gram compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/sanitize_cases.py
  echo "memcheck rc=$?"
  JSVD_SANITIZE_ONLY=pair JSVD_SANITIZE_SWEEPS=2 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 python3 scripts/sanitize_cases.py
  echo "racecheck rc=$?"; } > "$OUT/sanitizer.log" 2>&1
grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log"
python3 scripts/measure.py 200x256x256:float32 100x512x512:float32 10x1024x1024:float32 1x1536x1536:float32 \
  200x128x128:float64 100x512x512:float64 20x600x600:float32 ${MEASURE_CASES:-} --reps 3
