#!/usr/bin/env bash
# Set everything up if needed, then run the tests: pytest, then the LibTorch
# build and its C++ dispatcher test under ctest.
set -euo pipefail
source "$(dirname "$0")/setup_env.sh"

echo "== pytest"
"$PY" -m pytest -q -rs tests "$@"

echo "== cmake + ctest"
mkdir -p build
prefix=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build/cmake "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" -DPython3_EXECUTABLE="$PWD/$PY" >build/cmake.log 2>&1 \
  || { tail -40 build/cmake.log; exit 1; }
cmake --build build/cmake -j "$MAX_JOBS"
ctest --test-dir build/cmake --output-on-failure
