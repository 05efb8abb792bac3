#!/usr/bin/env bash
# A Python environment for the tests that need packages Debian does not
# ship (pytest, safetensors, tensorboard): a venv under build/pyenv that also sees
# Debian's numpy and torch. scripts/test.sh installs the deepspeed_c
# package (bindings/python) into it. Idempotent; prints the interpreter's
# path on stdout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
env="${DS_PYENV:-$root/build/pyenv}"
if [ ! -x "$env/bin/python" ]; then
  mkdir -p "$(dirname "$env")"
  /usr/bin/python3 -m venv --system-site-packages "$env" >&2
fi
if ! "$env/bin/python" -c "import safetensors, numpy" 2>/dev/null; then
  # Without PyPI the interop test reports itself skipped (exit 77) instead of
  # failing the whole suite; the warning says why.
  "$env/bin/python" -m pip install -q --disable-pip-version-check safetensors >&2 \
    || echo "python_env: WARNING: could not install safetensors from PyPI; the safetensors interop test will be skipped" >&2
fi
if ! "$env/bin/python" -c "import mpi4py" 2>/dev/null; then
  # Optional (a binary wheel, seconds): the test of Engine(comm=<mpi4py
  # communicator>) skips, saying so, where it is missing.
  "$env/bin/python" -m pip install -q --disable-pip-version-check mpi4py >&2 \
    || echo "python_env: WARNING: could not install mpi4py from PyPI; the mpi4py communicator test will be skipped" >&2
fi
if ! "$env/bin/python" -c "import tensorboard" 2>/dev/null; then
  # Reads back the TensorBoard event files the engine writes
  # (tests/python/test_tensorboard_readback.py skips, saying so, where it is missing).
  "$env/bin/python" -m pip install -q --disable-pip-version-check tensorboard >&2 \
    || echo "python_env: WARNING: could not install tensorboard from PyPI; the TensorBoard read-back test will be skipped" >&2
fi
if ! "$env/bin/python" -c "import pycparser, tree_sitter, tree_sitter_julia" 2>/dev/null; then
  # The Julia package's static checks (bindings/julia/CMakeLists.txt): a C parser
  # for the header and a Julia grammar (pure-Python / binary wheels, seconds). The
  # checker reads the grammar's node names: the versions it was written against.
  "$env/bin/python" -m pip install -q --disable-pip-version-check "pycparser>=2.21" \
      "tree-sitter>=0.23,<0.27" "tree-sitter-julia>=0.23,<0.24" >&2 \
    || echo "python_env: WARNING: could not install pycparser/tree-sitter/tree-sitter-julia from PyPI; the julia.* checks will be skipped" >&2
fi
if ! "$env/bin/python" -c "import pytest" 2>/dev/null; then
  "$env/bin/python" -m pip install -q --disable-pip-version-check pytest >&2
fi
echo "$env/bin/python"
