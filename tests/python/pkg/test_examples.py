"""The Python examples run and their loss falls (examples/python)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

EXAMPLES = os.path.join(REPO_ROOT, "examples", "python")
DS_RUN = os.path.join(REPO_ROOT, "tools", "ds-run")


def _run(cmd, timeout=300):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "loss fell" in r.stdout, r.stdout
    return r.stdout


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_train_numpy(dtype):
    _run([sys.executable, os.path.join(EXAMPLES, "train_numpy.py"), "--dtype", dtype, "--steps", "200"])


def test_train_numpy_on_two_ranks():
    out = _run([sys.executable, DS_RUN, "-n", "2", sys.executable,
                os.path.join(EXAMPLES, "train_numpy.py"), "--steps", "100"])
    assert out.count("loss fell") == 1   # rank 0 reports
