#!/usr/bin/env bash
# Configure and build deepspeed_c into build/ (or $DS_BUILD_DIR). Extra
# arguments go to cmake's configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${DS_BUILD_DIR:-$root/build}"
jobs="${DS_JOBS:-$(nproc)}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$jobs"
