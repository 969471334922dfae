#!/usr/bin/env bash
# A/B of a tuning knob (csrc/tuning_knobs.h) in one build: times CASES with scripts/measure.py at
# each value of the knob in alternating rounds, so that drift of the machine hits all alike.
# Build first (bash scripts/gpu_check.sh build). Log: $OUT/ab_knob.log (OUT defaults to ./gpu_logs).
# Usage: bash scripts/ab_knob.sh JSVD_PAIR_DELTA "100x512x512:float32 200x256x256:float32" [rounds=2]
#   VALUES: the values to compare (default "1 0", on and off; e.g. VALUES="16 32" for JSVD_PAIR_WIDTH).
#   MEASURE_ARGS: more arguments for scripts/measure.py. More than two values, one process each: scripts/knob_sweep.py.
set -eu
cd "$(dirname "$0")/.."
knob=$1; cases=$2; rounds=${3:-2}
OUT=${OUT:-$PWD/gpu_logs}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
for r in $(seq "$rounds"); do
  for v in ${VALUES:-1 0}; do
    env "$knob=$v" python3 scripts/measure.py $cases ${MEASURE_ARGS:-} | sed "s/^/$knob=$v r$r /" | tee -a "$OUT/ab_knob.log"
  done
done
