#!/usr/bin/env bash
# A/B of a tuning knob (kernels/tuning_knobs.h) in one build, on the GPU
# machine: times CASES with KNOB=1 and KNOB=0 in alternating rounds, so that
# drift of the machine hits both alike. Build first (scripts/gpu_check.sh build).
# usage: scripts/ab_knob.sh JSVD_PAIR_DELTA "100x512x512:float32 200x256x256:float32" [rounds]
# MEASURE_ARGS: more arguments for scripts/measure.py.
set -eu
cd "$(dirname "$0")/.."
knob=$1; cases=$2; rounds=${3:-2}
OUT=${OUT:-$PWD/gpu_logs}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
for r in $(seq "$rounds"); do
  for v in 1 0; do
    env "$knob=$v" python3 scripts/measure.py $cases ${MEASURE_ARGS:-} | sed "s/^/$knob=$v r$r /" | tee -a "$OUT/ab_knob.log"
  done
done
