#!/usr/bin/env bash
# The main job: install what is missing, build, and train a small GPT on
# generated 3-digit addition with ZeRO-2 on 2 MPI ranks (one thread each).
# It ends with the held-out accuracy line and the path of the loss-curve PNG.
#
#   scripts/quickstart.sh [--ranks N] [train_gpt options...]   (see --help)
#   scripts/quickstart.sh --mlp [train_mlp options...]         the MLP example instead
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${DS_BUILD_DIR:-$root/build}"
ranks=2
example=train_gpt
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks)
      [ $# -ge 2 ] || { echo "quickstart: --ranks needs a value" >&2; exit 2; }
      [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "quickstart: --ranks: '$2' is not a positive integer" >&2; exit 2; }
      ranks="$2"; shift 2 ;;
    --mlp) example=train_mlp; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

"$root/scripts/install_deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "${DS_JOBS:-$(nproc)}" --target "$example"

export OMP_NUM_THREADS=1
if [ "$example" = train_mlp ]; then
  exec "$build/examples/train_mlp" "${args[@]+"${args[@]}"}"
fi
exec "$root/tools/ds-run" -n "$ranks" -- "$build/examples/train_gpt" "${args[@]+"${args[@]}"}"
