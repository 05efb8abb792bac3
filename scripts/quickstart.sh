#!/usr/bin/env bash
# The main job on an embedded default: install dependencies, build, and train
# the MLP example through the engine (its loss must fall).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
exec "$root/build/examples/train_mlp" "$@"
