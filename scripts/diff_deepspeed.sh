#!/usr/bin/env bash
# Differential against real DeepSpeed (issue 9, item 5): the same MLP, data and
# config trained for 30 steps by deepspeed.initialize (DeepSpeed on CPU,
# DS_ACCELERATOR=cpu, one gloo rank) and by deepspeed_c.torch.initialize, compared
# per step; prints the table "config -> max differences, verdict" (docs/PYTHON.md,
# "Differential against DeepSpeed").
#
#   scripts/diff_deepspeed.sh [driver options]     e.g. --configs fp32_adamw_warmuplr_clip --jobs 2
#   scripts/diff_deepspeed.sh --prepare            only create/complete the venv and JIT-build
#                                                  DeepSpeed's CPU ops (scripts/test.sh runs this in
#                                                  the background while it builds)
#
# Environment:
#   DS_DIFF_VENV             a virtual environment that already has torch and deepspeed
#                            (nothing but deepspeed_c is installed into it, without deps).
#                            Default: ~/.cache/deepspeed_c/diffvenv (XDG_CACHE_HOME), created
#                            and completed here with torch and deepspeed from the CPU wheel
#                            index when reachable, else PyPI (the PyPI torch wheel pulls the
#                            CUDA libraries: ~5 GB); kept between runs, so only the first
#                            run of the test command on a machine downloads them.
#   DS_DIFF_DEEPSPEED        the deepspeed requirement for a created venv (default deepspeed==0.19.8)
#   DS_DIFF_TORCH            the torch requirement for a created venv (default torch)
#   DS_DIFF_PYTHON           the interpreter that creates the venv (default /usr/bin/python3)
#   DS_DIFF_SKIP_INSTALL=1   do not (re)install ./bindings/python
# Exit status: the driver's (0 when every config DeepSpeed can run agrees or differs only
# where docs/DESIGN.md says so), or the failing step's.
set -euo pipefail
prepare_only=0
if [ "${1:-}" = "--prepare" ]; then prepare_only=1; shift; fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
t0=$SECONDS
phase() { echo "diff_deepspeed: [$((SECONDS - t0))s] $*" >&2; }

# owned=1: the default venv, which this script creates and completes; a venv
# given in DS_DIFF_VENV is the user's and only gets deepspeed_c.
owned=1
[ -z "${DS_DIFF_VENV:-}" ] || owned=0
venv="${DS_DIFF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/deepspeed_c/diffvenv}"
if [ ! -x "$venv/bin/python" ]; then
  [ "$owned" = 1 ] || { echo "diff_deepspeed: DS_DIFF_VENV=$venv has no bin/python" >&2; exit 2; }
  phase "creating $venv"
  mkdir -p "$(dirname "$venv")"
  "${DS_DIFF_PYTHON:-/usr/bin/python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
fi
py="$venv/bin/python"
pip=("$py" -m pip install --disable-pip-version-check)

if ! "$py" -c "import torch" 2>/dev/null; then
  [ "$owned" = 1 ] || { echo "diff_deepspeed: $venv has no torch (DS_DIFF_VENV must have torch and deepspeed)" >&2; exit 2; }
  if "$py" -c "import urllib.request as u; u.urlopen('https://download.pytorch.org/whl/cpu/', timeout=10)" 2>/dev/null; then
    phase "installing ${DS_DIFF_TORCH:-torch} from the CPU wheel index"
    "${pip[@]}" -q --index-url https://download.pytorch.org/whl/cpu "${DS_DIFF_TORCH:-torch}"
  else
    phase "download.pytorch.org unreachable: installing ${DS_DIFF_TORCH:-torch} from PyPI (CUDA wheels, ~5 GB)"
    "${pip[@]}" -q "${DS_DIFF_TORCH:-torch}"
  fi
fi
if ! "$py" -c "import deepspeed" 2>/dev/null; then
  [ "$owned" = 1 ] || { echo "diff_deepspeed: $venv has no deepspeed (DS_DIFF_VENV must have torch and deepspeed)" >&2; exit 2; }
  phase "installing ${DS_DIFF_DEEPSPEED:-deepspeed==0.19.8}"
  # ninja: DeepSpeed JIT-builds its CPU ops (fused_adam, cpu_lion, shm comm) on first use.
  "${pip[@]}" -q "${DS_DIFF_DEEPSPEED:-deepspeed==0.19.8}" ninja
fi

# DeepSpeed JIT-builds its CPU ops by running `ninja` from PATH: the venv's own
# (pip's ninja) must be found on a machine without Debian's ninja-build.
export PATH="$venv/bin:$PATH"
if [ "$prepare_only" = 1 ]; then
  # Build the ops the matrix uses now (cached under ~/.cache/torch_extensions),
  # so the first config does not pay for the compiles.
  phase "JIT-building DeepSpeed's CPU ops (fused_adam, cpu_adam, cpu_lion, shm comm)"
  DS_ACCELERATOR=cpu "$py" - <<'PY'
from deepspeed.accelerator import get_accelerator
for name in ("FusedAdamBuilder", "CPUAdamBuilder", "CPULionBuilder", "ShareMemCommBuilder"):
    builder = get_accelerator().create_op_builder(name)
    if builder is not None:
        builder.load(verbose=False)
PY
  phase "prepared"
  exit 0
fi

if [ "${DS_DIFF_SKIP_INSTALL:-0}" != 1 ]; then
  phase "installing ./bindings/python"
  if command -v ccache >/dev/null; then
    export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  fi
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  deps=()
  [ "$owned" = 1 ] || deps=(--no-deps)  # leave a given venv's packages as they are
  "${pip[@]}" -q "${deps[@]}" ./bindings/python
fi

phase "running the matrix"
set +e
DS_ACCELERATOR=cpu "$py" tests/python/deepspeed_diff/driver.py --out-dir "$root/build/deepspeed_diff" "$@"
rc=$?
set -e
phase "done (exit $rc)"
exit $rc
