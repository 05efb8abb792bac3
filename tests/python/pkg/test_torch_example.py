"""examples/python/train_torch.py (a DeepSpeed script but for its import
line) runs on deepspeed_c and its loss falls."""
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "python", "train_torch.py")


def test_train_torch_example_runs_and_learns():
    out = subprocess.run([sys.executable, EXAMPLE, "--steps", "40"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    losses = [float(m) for m in re.findall(r"loss ([0-9.]+)", out.stdout)]
    assert len(losses) >= 4, out.stdout
    assert losses[-1] < 0.5 * losses[0], out.stdout
    assert "40 steps" in out.stdout and "0 skipped" in out.stdout
