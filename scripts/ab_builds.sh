#!/usr/bin/env bash
# A/B of a source change on the GPU machine, in one call: builds this tree and a copy with ab.diff reversed
# (the baseline), then times CASES with scripts/measure.py on both, alternating per round so that drift
# of the machine hits both alike. Log: $OUT/ab.log (OUT defaults to ./gpu_logs).
# Usage: bash scripts/ab_builds.sh ab.diff "100x512x512:float32 1x1536x1536:float32" [rounds=2] [PATCH2]
#   ab.diff: `git diff BASE -- kernels csrc > ab.diff`, made where the git history is.
#   PATCH2: a third build, "mid", this tree with PATCH2 reversed (the later of two stacked changes), so one
#   call times base, base + 1 and base + 2.
#   MEASURE_ARGS: more arguments for scripts/measure.py (e.g. "--reps 30" for small cases).
set -eu
cd "$(dirname "$0")/.."
patch_file=$(realpath "$1"); cases=$2; rounds=${3:-2}; patch2=${4:+$(realpath "$4")}
OUT=${OUT:-$PWD/gpu_logs}; mkdir -p "$OUT"
base=/tmp/jsvd_ab_base
rm -rf "$base"; mkdir -p "$base"
tar --exclude=./build --exclude=./.venv --exclude='*.so' -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -s -R -p1 < "$patch_file")
mid=/tmp/jsvd_ab_mid; sides="new base"
if [ -n "$patch2" ]; then
  rm -rf "$mid"; mkdir -p "$mid"
  tar --exclude=./build --exclude=./.venv --exclude='*.so' -cf - . | tar -xf - -C "$mid"
  (cd "$mid" && patch -s -R -p1 < "$patch2")
  (cd "$mid" && OUT=$OUT/mid bash scripts/gpu_check.sh build >/dev/null) &
  sides="new mid base"
fi
export OUT
bash scripts/gpu_check.sh build >/dev/null &
(cd "$base" && OUT=$OUT/base bash scripts/gpu_check.sh build >/dev/null) &
wait
for r in $(seq "$rounds"); do
  for side in $sides; do
    dir=$PWD; [ "$side" = base ] && dir=$base; [ "$side" = mid ] && dir=$mid
    (cd "$dir" && PYTHONPATH=$dir python3 scripts/measure.py $cases ${MEASURE_ARGS:-}) | sed "s/^/$side r$r /" | tee -a "$OUT/ab.log"
  done
done
