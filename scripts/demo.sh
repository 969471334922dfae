#!/usr/bin/env bash
# Set everything up if needed, then run the demo: python -m torch_jsvd
set -euo pipefail
source "$(dirname "$0")/setup_env.sh"
"$PY" -m torch_jsvd "$@"
