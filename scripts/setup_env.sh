#!/usr/bin/env bash
# Idempotent setup, sourced by demo.sh / test.sh / bench_cpu.sh: a virtual
# environment in .venv with torch 2.11.0 from the package index, the build and
# test tools, and the extension built in place (rebuilt when a source changed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${JSVD_VENV:-.venv}
PY="$VENV/bin/python"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}

if [ ! -x "$PY" ]; then
  echo "== creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
if ! "$PY" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.11.0")' 2>/dev/null; then
  echo "== installing torch 2.11.0"
  "$PY" -m pip install --upgrade pip
  "$PY" -m pip install torch==2.11.0
fi
if ! "$PY" -c 'import setuptools, wheel, ninja, pytest, expecttest, numpy, mpmath, hypothesis' 2>/dev/null; then
  echo "== installing build and test tools"
  "$PY" -m pip install "setuptools>=64" wheel ninja pytest expecttest numpy mpmath hypothesis
fi

# Rebuild when the extension is missing or older than any of its sources.
so=$(ls torch_jsvd/_C*.so 2>/dev/null | head -1 || true)
if [ -z "$so" ] || [ -n "$(find csrc kernels setup.py -newer "$so" -type f 2>/dev/null | head -1)" ] \
   || ! "$PY" -c 'import torch_jsvd' 2>/dev/null; then
  echo "== building torch_jsvd (MAX_JOBS=$MAX_JOBS)"
  "$PY" -m pip install --no-build-isolation -e . 2>&1 | tail -3
  touch torch_jsvd/_C*.so
fi
