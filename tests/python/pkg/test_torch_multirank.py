"""Two ranks under tools/ds-run, each training on half of every batch through
deepspeed_c.torch.initialize (ZeRO 0/1/2), agree with each other exactly and
with the one-process pure-torch reference on the whole batch; ZeRO 3 with
two ranks is refused on every rank with UnsupportedError."""
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch_helpers as th  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
DS_RUN = os.path.join(ROOT, "tools", "ds-run")

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")


def run_two_ranks(stage, out):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [sys.executable, DS_RUN, "-n", "2", sys.executable,
           os.path.join(HERE, "torch_multirank_worker.py"), str(stage), out]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_two_ranks_agree_with_one_process(tmp_path, stage):
    out = str(tmp_path / "params")
    run_two_ranks(stage, out)
    a = torch.load(out + ".rank0")
    b = torch.load(out + ".rank1")
    assert th.max_rel_diff(a, b) == 0.0
    ref, _, _ = th.reference_run(th.mlp(), th.config(gas=2), th.batches(20, batch=8), 10)
    diff = th.max_rel_diff(a, ref[-1])
    print(f"ZeRO {stage}, 2 ranks vs one-process torch reference: max relative difference {diff:.3g}")
    assert diff <= 1e-6


def test_zero3_with_two_ranks_is_refused_on_every_rank(tmp_path):
    out = str(tmp_path / "params")
    run_two_ranks(3, out)
    for r in (0, 1):
        with open(f"{out}.rank{r}.unsupported") as f:
            assert "ZeRO stage 3" in f.read()
