#!/usr/bin/env bash
# Everything the GPU machine has to do, in one call: build (sm_90, 16 jobs),
# CUDA + CPU tests, compute-sanitizer on the new kernels, benchmarks.
# Logs go to $OUT (or ./gpu_logs). Usage: scripts/gpu_check.sh [build] [test] [memcheck|sanitize] [race-qr] [race-delta]
#   [robust-corpus] [robust-fuzz] [robust-forced] [robust-smem] [race-gemm] [bench|bench-quick] [bench-large] [bench-varlen] [bench-lowrank] [demo-compress] [bench-corpus] [script.py]
# (sanitize: memcheck over every case, racecheck over the warp, whole, pair and polish cases but the
# 512-row block pairs, and the Gram EVD kernel alone; race-qr: the QR's panel, transpose and
# one-launch kernels, the batched start's products and V's deferred log pass alone; race-delta: the 512-row block pairs' kernel alone, one sweep. Under racecheck
# with every kernel instrumented the Gram and delta cases each run past 300 s, and the three
# stages together past a 600 s device call: sanitize in one call, race-qr race-delta in another)
set -u
# The device's copy of the tree can carry stale git metadata: call as
#   JSVD_COMMIT=<short sha> bash scripts/gpu_check.sh ...
# so that benchmark results name the commit they ran at (benchmarks/common.py).
[ -n "${JSVD_COMMIT:-}" ] || echo "note: JSVD_COMMIT not set; benchmark results will name the device checkout's commit"
export JSVD_COMMIT=${JSVD_COMMIT:-}
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_logs}
mkdir -p "$OUT"
stages=${*:-build test sanitize bench-quick}
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1
PY=${PY:-python3}
# The device image's default compiler (/opt/gcc) embeds its own libstdc++ pieces
# into the extension, and any std::ostream use there (every TORCH_CHECK message)
# then crashes against torch's libstdc++; the system g++ links it dynamically.
if [ -x /usr/bin/g++ ]; then export CC=/usr/bin/gcc CXX=/usr/bin/g++ LDSHARED="/usr/bin/g++ -shared"; fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
status=0
for s in $stages; do
  t0=$(date +%s)
  case $s in
    build)
      $PY setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -40 "$OUT/build.log"; exit 1; } ;;
    test)
      # (test_mem.log: the tests whose device memory peaked beyond 4 GiB, tests/conftest.py; 12 workers on the
      # device's 16 cores: the suite in 388 s against ~475 with 8, H200, stop 71, so build + test fit one call;
      # 491 s at stop 75, the build 89: a call of its own. --durations: where the time goes)
      OMP_NUM_THREADS=2 JSVD_MEM_LOG="$OUT/test_mem.log" $PY -m pytest -v -rs -n 12 --timeout=300 --durations=30 \
        -p no:benchmark tests \
        >"$OUT/pytest.log" 2>&1 || status=1
      tail -15 "$OUT/pytest.log" ;;
    robust-corpus)
      # the full corpus (sizes to 1024) on ROBUST_DEV (cuda, or cpu); ROBUST_K narrows it (pytest -k, e.g. "float32")
      OMP_NUM_THREADS=2 JSVD_CORPUS=full $PY -m pytest -q -rfs --tb=line -n 8 --timeout=300 -p no:benchmark \
        --durations=10 -k "${ROBUST_DEV:-cuda}${ROBUST_K:+ and $ROBUST_K}" tests/test_corpus.py >"$OUT/robust_corpus.log" 2>&1 || status=1
      tail -25 "$OUT/robust_corpus.log" ;;
    robust-fuzz)
      OMP_NUM_THREADS=2 JSVD_FUZZ_EXAMPLES=${JSVD_FUZZ_EXAMPLES:-400} $PY -m pytest -q -rfs --tb=line -n 8 --timeout=300 \
        -p no:benchmark -k cuda tests/test_fuzz.py tests/test_finite_or_flagged.py tests/test_load.py \
        >"$OUT/robust_fuzz.log" 2>&1 || status=1
      tail -15 "$OUT/robust_fuzz.log" ;;
    robust-forced)
      # the CI-size corpus with each level forced on every shape it can take (JSVD_LEVEL), and QR
      # preconditioning from 2 columns on
      for env in JSVD_LEVEL=whole JSVD_LEVEL=pair JSVD_LEVEL=gram JSVD_LEVEL=gemm JSVD_QR_MIN_COLS=2; do
        echo "== $env"
        env OMP_NUM_THREADS=2 $env $PY -m pytest -q -rfs --tb=line -n 8 --timeout=300 -p no:benchmark -k cuda \
          tests/test_corpus.py 2>&1 || status=1
      done >"$OUT/robust_forced.log"
      grep -E "^== |passed|failed" "$OUT/robust_forced.log" | tail -12 ;;
    robust-smem)
      # shapes whose shared-memory plans sit near the per-block limit, through every entry point
      $PY scripts/smem_limit_cases.py >"$OUT/robust_smem.log" 2>&1 || status=1
      tail -8 "$OUT/robust_smem.log" ;;
    bench-corpus)
      $PY benchmarks/bench_corpus.py --device cuda --sizes ${CORPUS_SIZES:-256,1024} 2>&1 | tee "$OUT/bench_corpus.log" | tail -8
      cp benchmarks/RESULTS.md "$OUT/" ;;
    memcheck)
      compute-sanitizer --tool memcheck --error-exitcode 9 $PY scripts/sanitize_cases.py >"$OUT/memcheck.log" 2>&1
      echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log" ;;
    sanitize)
      { compute-sanitizer --tool memcheck --error-exitcode 9 $PY scripts/sanitize_cases.py
        echo "memcheck rc=$?"
        # racecheck with every kernel instrumented runs past 300 s on the Gram case, so the Gram
        # and QR cases are checked with only their own kernels instrumented, one sweep
        JSVD_SANITIZE_ONLY=${JSVD_SANITIZE_ONLY:-warp,whole,pair,polish} JSVD_SANITIZE_SKIP=delta JSVD_SANITIZE_SWEEPS=2 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 $PY scripts/sanitize_cases.py
        echo "racecheck rc=$?"
        JSVD_SANITIZE_ONLY=gram JSVD_SANITIZE_SWEEPS=1 compute-sanitizer --tool racecheck --racecheck-report hazard \
          --kernel-name kns=gram_evd_kernel --error-exitcode 9 $PY scripts/sanitize_cases.py
        echo "racecheck (gram_evd_kernel) rc=$?"; } >"$OUT/sanitizer.log" 2>&1
      grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$OUT/sanitizer.log" | head -20 ;;
    race-qr)
      # (and the batched start's two products, gram_products.cu, and its convergence checks, start_converged.cu)
      for ck in qr:householder_panel qr:transpose_kernel qr:qr_whole_kernel qr:qr_regs_kernel qr:apply_reflectors_kernel \
                qr:apply_wy_kernel qr:sort_rows_kernel start:gram_kernel start:start_product_kernel \
                start:start_converged_kernel start:converged_test_kernel start:converged_outputs_kernel log:log_v_apply_kernel; do
        JSVD_SANITIZE_ONLY=${ck%%:*} JSVD_SANITIZE_SWEEPS=1 compute-sanitizer --tool racecheck --racecheck-report hazard \
          --kernel-name kns=${ck#*:} --error-exitcode 9 $PY scripts/sanitize_cases.py
        echo "racecheck (${ck#*:}) rc=$?"
      done >"$OUT/racecheck_qr.log" 2>&1
      grep -E "rc=|RACECHECK SUMMARY|hazard" "$OUT/racecheck_qr.log" | head -12 ;;
    race-delta)
      JSVD_SANITIZE_ONLY=delta JSVD_SANITIZE_SWEEPS=1 compute-sanitizer --tool racecheck --racecheck-report hazard \
        --kernel-name kns=svd_smem_kernel --error-exitcode 9 $PY scripts/sanitize_cases.py >"$OUT/racecheck_delta.log" 2>&1
      echo "racecheck (delta) rc=$?"; grep -E "RACECHECK SUMMARY|hazard" "$OUT/racecheck_delta.log" | head -5 ;;
    race-gemm)
      # the GEMM level's pair EVD kernel (its GEMMs are cuBLAS's): its first three launches (each takes minutes under racecheck)
      JSVD_SANITIZE_ONLY=gemm JSVD_SANITIZE_SWEEPS=1 compute-sanitizer --tool racecheck --racecheck-report hazard --launch-count 3 \
        --kernel-name kns=pair_evd_kernel --error-exitcode 9 $PY scripts/sanitize_cases.py >"$OUT/racecheck_gemm.log" 2>&1
      echo "racecheck (gemm) rc=$?"; grep -E "RACECHECK SUMMARY|hazard" "$OUT/racecheck_gemm.log" | head -5 ;;
    bench-large|bench-lowrank|bench-varlen)
      # (each writes its JSON and plot to $OUT itself: benchmarks/common.py, results_dir)
      b=bench_${s#bench-}
      $PY benchmarks/$b.py 2>&1 | tee "$OUT/$b.log" | tail -32
      cp benchmarks/RESULTS.md "$OUT/" ;;
    demo-compress)
      $PY examples/compress_demo.py --train-s ${DEMO_TRAIN_S:-60} --out "$OUT" 2>&1 | tee "$OUT/demo_compress.log" | tail -12 ;;
    bench)
      $PY benchmarks/bench_gpu.py --budget-s 420 2>&1 | tee "$OUT/bench.log" | tail -45
      cp benchmarks/RESULTS.md "$OUT/" ;;  # (its bench_gpu section rewritten: copy it back into the tree)
    bench-quick)
      $PY benchmarks/bench_gpu.py --quick --no-md --budget-s 200 2>&1 | tee "$OUT/bench.log" | tail -25 ;;
    *) $PY $s 2>&1 | tee "$OUT/custom.log" | tail -60 ;;
  esac
  echo "== stage $s: $(( $(date +%s) - t0 )) s"
done
exit $status
