"""Multi-rank training from Python: `tools/ds-run -n 2 python worker.py`.

The worker (workers/mlp_worker.py) trains a small MLP with hand-written
gradients for 10 steps with deepspeed_c.Engine; each rank feeds its chunk of
the same global batch, so DeepSpeed's data-parallel average of the ranks'
gradients is the one-process gradient. Checked:
  * the ranks agree bit for bit (weights, lr, grad norm, loss scale);
  * 2 ranks agree with one process fed the whole global batch (ZeRO 0-3,
    gradient accumulation, fp16, bf16), and both with a float64 reference;
  * a checkpoint saved on 2 ranks loads in one process (exact weights) and
    training continues identically;
  * the communicator can be the engine's default world, an explicit
    Comm.world() + finalize(), or an mpi4py communicator;
  * exit: a rank that raises ends the job at once (no hang in MPI_Finalize),
    and an engine that is never freed does not fail the job.

Tolerances (max |difference| of the fp32 master weights, relative grad norm):
  2 ranks vs 1 process, fp32: 1e-6 / 1e-6. The only difference is the order
    of fp32 sums (each rank's float64 gradient is rounded to fp32 before the
    average; one process rounds the average). Observed 6e-8 / 3e-8.
  fp32 vs the float64 reference: 5e-6 / 1e-5 (10 steps of fp32 rounding;
    observed 4.5e-7 / 1.1e-6).
  fp16 (gradients accumulate in fp16, unit roundoff 4.9e-4): 2e-4 / 2e-3 between
    2 ranks and 1 process (observed 2.6e-5 / 1.5e-4), 5e-3 / 5e-3 against float64.
  bf16 (unit roundoff 3.9e-3): 1e-3 / 1e-2 (observed 1.1e-4 / 9.4e-4), 2e-2 / 2e-2
    against float64 (observed 3.7e-3 / 2.3e-3).
The lr is compared exactly (the schedule is the same arithmetic everywhere).
Every launch has a 120 s limit: a hang fails the test instead of blocking CI.
"""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Tuple

import numpy as np
import pytest

import multirank_helpers as H

pytestmark = pytest.mark.skipif(H.mpi_available() is not None, reason=str(H.mpi_available()))

WORKER = "mlp_worker.py"
STEPS = 10
# dtype -> (params atol 2 ranks vs 1 process, grad-norm rtol, params atol vs float64, grad-norm rtol)
TOL = {"fp32": (1e-6, 1e-6, 5e-6, 1e-5), "fp16": (2e-4, 2e-3, 5e-3, 5e-3),
       "bf16": (1e-3, 1e-2, 2e-2, 2e-2)}


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One-process runs (ZeRO 0, the whole global batch per step), cached per dtype."""
    cache: Dict[str, Dict[str, np.ndarray]] = {}

    def get(dtype: str) -> Dict[str, np.ndarray]:
        if dtype not in cache:
            out = str(tmp_path_factory.mktemp(f"single_{dtype}"))
            H.run_single(WORKER, ["--out", out, "--stage", "0", "--dtype", dtype, "--steps", str(STEPS)])
            cache[dtype] = H.load_rank(out, 0)
        return cache[dtype]
    return get


@pytest.fixture(scope="module")
def reference():
    return H.reference_train(STEPS)


def two_ranks(out: str, *args: str) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    H.run_ranks(WORKER, ["--out", out, "--steps", str(STEPS), *args])
    return H.load_rank(out, 0), H.load_rank(out, 1)


def max_param_diff(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray], prefix_b: str = "param.") -> float:
    return max(float(np.max(np.abs(a["param." + n].astype(np.float64) - b[prefix_b + n]))) for n in H.NAMES)


def assert_ranks_identical(r0: Dict[str, np.ndarray], r1: Dict[str, np.ndarray]) -> None:
    """Everything but the local loss (each rank's own batch) is the same bits on both ranks."""
    assert set(r0) == set(r1)
    for k in r0:
        if k != "loss":
            assert H.bits(r0[k]) == H.bits(r1[k]), f"ranks differ in {k}: {r0[k]} vs {r1[k]}"
    assert r0["world"].tolist() == [2, STEPS, 0]


def assert_matches(two: Dict[str, np.ndarray], r1: Dict[str, np.ndarray], one: Dict[str, np.ndarray],
                   ref: Dict[str, np.ndarray], dtype: str) -> None:
    p_tol, n_tol, p_ref_tol, n_ref_tol = TOL[dtype]
    init = H.initial_params()
    moved = max(float(np.max(np.abs(two["param." + n] - init[n]))) for n in H.NAMES)
    assert moved > 1e-2, f"the weights barely moved ({moved}): the comparison would prove nothing"
    d = max_param_diff(two, one)
    assert d <= p_tol, f"2 ranks vs 1 process ({dtype}): weights differ by {d} > {p_tol}"
    np.testing.assert_array_equal(two["lr"], one["lr"])
    np.testing.assert_allclose(two["grad_norm"], one["grad_norm"], rtol=n_tol, atol=0)
    np.testing.assert_array_equal(two["loss_scale"], one["loss_scale"])
    np.testing.assert_array_equal(two["skipped"], one["skipped"])
    # The global loss is the mean of the ranks' local losses.
    np.testing.assert_allclose((two["loss"] + r1["loss"]) / 2, one["loss"], rtol=n_tol, atol=0)
    if dtype == "fp32" or not two["skipped"].any():
        dref = max_param_diff(two, {"param." + n: v for n, v in ref["params"].items()})
        assert dref <= p_ref_tol, f"2 ranks ({dtype}) vs the float64 reference: {dref} > {p_ref_tol}"
        np.testing.assert_allclose(two["lr"], ref["lr"], rtol=0, atol=1e-15)
        np.testing.assert_allclose(two["grad_norm"], ref["grad_norm"], rtol=n_ref_tol, atol=0)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_two_ranks_match_one_process(stage, tmp_path, single, reference):
    """ZeRO `stage` on 2 ranks (stage 3: forward inside engine.gathered) = one process."""
    r0, r1 = two_ranks(str(tmp_path), "--stage", str(stage))
    assert_ranks_identical(r0, r1)
    assert_matches(r0, r1, single("fp32"), reference, "fp32")


def test_two_ranks_gradient_accumulation(tmp_path, single, reference):
    """ZeRO 2, 2 ranks x 2 micro-steps of 2 samples = one process with 8 samples per step."""
    r0, r1 = two_ranks(str(tmp_path), "--stage", "2", "--gas", "2")
    assert_ranks_identical(r0, r1)
    assert_matches(r0, r1, single("fp32"), reference, "fp32")


@pytest.mark.parametrize("dtype,stage", [("fp16", 2), ("bf16", 3)])
def test_two_ranks_low_precision(dtype, stage, tmp_path, single, reference):
    r0, r1 = two_ranks(str(tmp_path), "--stage", str(stage), "--dtype", dtype)
    assert_ranks_identical(r0, r1)
    one = single(dtype)
    assert_matches(r0, r1, one, reference, dtype)
    if dtype == "fp16":
        # The dynamic loss scale grew (window 4) identically in both runs.
        assert r0["loss_scale"][-1] > r0["loss_scale"][0]


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_checkpoint_from_two_ranks_loads_in_one_process(stage, tmp_path, reference):
    """Saved on 2 ranks after step 3 (inside the lr warmup), loaded by one process:
    the fp32 weights are the same bits, and 7 more steps (optimizer state and the
    schedule restored) end where the 2 ranks end."""
    ckpt, out2, out1 = (str(tmp_path / d) for d in ("ckpt", "two", "one"))
    r0, r1 = two_ranks(out2, "--stage", str(stage), "--save", ckpt, "--save-at", "3")
    assert_ranks_identical(r0, r1)
    H.run_single(WORKER, ["--out", out1, "--stage", "0", "--steps", str(STEPS), "--load", ckpt, "--start", "3"])
    one = H.load_rank(out1, 0)
    for n in H.NAMES:
        assert H.bits(one["loaded." + n]) == H.bits(r0["saved." + n]), f"{n}: loaded weights differ from saved"
    assert one["world"].tolist() == [1, STEPS, 0]
    np.testing.assert_array_equal(one["lr"], r0["lr"][3:])
    np.testing.assert_allclose(one["grad_norm"], r0["grad_norm"][3:], rtol=TOL["fp32"][1], atol=0)
    d = max_param_diff(r0, one)
    assert d <= TOL["fp32"][0], f"continued training after the load differs by {d}"
    dref = max_param_diff(one, {"param." + n: v for n, v in reference["params"].items()})
    assert dref <= TOL["fp32"][2], f"vs the float64 reference: {dref}"


def test_explicit_world_comm_and_finalize(tmp_path, single, reference):
    """Engine(cfg, comm=Comm.world()), then engine.close() and comm.finalize() by the host."""
    r0, r1 = two_ranks(str(tmp_path), "--stage", "3", "--comm", "comm")
    assert_ranks_identical(r0, r1)
    assert_matches(r0, r1, single("fp32"), reference, "fp32")


def test_mpi4py_communicator(tmp_path, single, reference):
    """Engine(cfg, comm=mpi4py.MPI.COMM_WORLD): mpi4py initialises MPI (MPI_THREAD_MULTIPLE)."""
    # Probed in a child: importing mpi4py.MPI here would initialise MPI in the pytest process.
    probe = subprocess.run([sys.executable, "-c", "from mpi4py import MPI"], capture_output=True, text=True,
                           timeout=60)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(f"mpi4py is not installed or cannot load MPI (pip install mpi4py): {why}")
    r0, r1 = two_ranks(str(tmp_path), "--stage", "2", "--comm", "mpi4py")
    assert_ranks_identical(r0, r1)
    assert_matches(r0, r1, single("fp32"), reference, "fp32")


def test_failing_rank_ends_the_job(tmp_path):
    """Rank 1 raises after init while rank 0 goes on into ds_backward's collective.
    The job must end at once with an error (it used to hang: the failing rank's
    exit called MPI_Finalize, which waits for rank 0, which waits for rank 1)."""
    r = H.run_ranks(WORKER, ["--out", str(tmp_path), "--stage", "2", "--fail-rank", "1"],
                    timeout=60, check=False)
    assert r.returncode != 0
    assert "rank 1 fails on purpose after init" in r.stderr
    assert not os.path.exists(tmp_path / "rank0.npz")


def test_leaked_engine_does_not_fail_the_job(tmp_path):
    """An engine that is never freed (an extra reference nobody drops) used to keep
    MPI from being finalised, and mpirun failed the job although every rank
    succeeded; deepspeed_c closes open engines at interpreter exit."""
    r = H.run_ranks(WORKER, ["--out", str(tmp_path), "--stage", "3", "--leak"], check=False)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "exited without calling" not in r.stderr and "finalize" not in r.stderr.lower()
    r0, r1 = H.load_rank(str(tmp_path), 0), H.load_rank(str(tmp_path), 1)
    assert_ranks_identical(r0, r1)
