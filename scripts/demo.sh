#!/usr/bin/env bash
# Set everything up if needed, then run the demo: python -m torch_jsvd [args]
# (`bash scripts/demo.sh compress [args]`: the layer-compression demo, examples/compress_demo.py).
set -euo pipefail
source "$(dirname "$0")/setup_env.sh"
if [ "${1:-}" = compress ]; then
  shift
  "$PY" -m pip show matplotlib >/dev/null 2>&1 || "$PY" -m pip install -q matplotlib
  exec "$PY" examples/compress_demo.py "$@"
fi
"$PY" -m torch_jsvd "$@"
