"""examples/python/train_torch.py (a DeepSpeed script but for its import
line) runs on deepspeed_c, on one rank and on two under tools/ds-run, and its
loss falls."""
import os
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "python", "train_torch.py")


def check(cmd):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    losses = [float(m) for m in re.findall(r"loss ([0-9.]+)", out.stdout)]
    assert len(losses) >= 4, out.stdout
    assert losses[-1] < 0.5 * losses[0], out.stdout
    assert out.stdout.count("done: 40 steps") == 1 and "0 skipped" in out.stdout  # rank 0 reports
    return out.stdout


def test_train_torch_example_runs_and_learns():
    check([sys.executable, EXAMPLE, "--steps", "40"])


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_train_torch_example_on_two_ranks():
    out = check([sys.executable, os.path.join(ROOT, "tools", "ds-run"), "-n", "2", sys.executable,
                 EXAMPLE, "--steps", "40"])
    assert "2560 samples" in out   # 40 steps x 16 x 2 accumulation x 2 ranks
