"""Shared pieces of the multi-rank tests (test_multirank.py and workers/).

A tiny two-layer MLP with hand-written float64 gradients, deterministic data
(the same global batch per optimizer step on every run, cut into one chunk
per rank and micro-step), the
DeepSpeed config the workers train with, and the launcher plumbing: run a
worker on N ranks under tools/ds-run (with a timeout, so a hang fails) or
in one process.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DS_RUN = os.path.join(REPO, "tools", "ds-run")
WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")

D_IN, HIDDEN, D_OUT = 6, 8, 3
GLOBAL_BATCH = 8
# (name, shape) in add order; 83 elements, so ZeRO partitions cut through parameters.
PARAMS = [("fc1.weight", (HIDDEN, D_IN)), ("fc1.bias", (HIDDEN,)),
          ("fc2.weight", (D_OUT, HIDDEN)), ("fc2.bias", (D_OUT,))]
NAMES = [n for n, _ in PARAMS]

# Seconds one multi-rank run may take before the test fails (a hang must not block CI).
RUN_TIMEOUT = 120


def initial_params() -> Dict[str, np.ndarray]:
    """The same fp32 initial weights on every rank and in every process."""
    rng = np.random.default_rng(1234)
    return {n: (rng.standard_normal(s) * 0.5).astype(np.float32) for n, s in PARAMS}


def global_batch(step: int) -> "tuple[np.ndarray, np.ndarray]":
    """(inputs, targets) of optimizer step `step` for the whole world, float64."""
    rng = np.random.default_rng(10_000 + step)
    x = rng.standard_normal((GLOBAL_BATCH, D_IN))
    t = rng.standard_normal((GLOBAL_BATCH, D_OUT))
    return x, t


def local_batch(step: int, micro: int, rank: int, world: int, gas: int) -> "tuple[np.ndarray, np.ndarray]":
    """Rank `rank`'s micro-batch `micro` of optimizer step `step`: chunk
    micro*world + rank of that step's global batch, cut into world*gas chunks."""
    x, t = global_batch(step)
    m = GLOBAL_BATCH // (world * gas)
    c = micro * world + rank
    return x[c * m:(c + 1) * m], t[c * m:(c + 1) * m]


def loss_and_grads(w: Dict[str, np.ndarray], x: np.ndarray, t: np.ndarray) -> "tuple[float, Dict[str, np.ndarray]]":
    """Mean over the batch of 0.5*|y - t|^2 for y = fc2(tanh(fc1(x))), and its
    gradients, in float64 (each rank's is the gradient of its local mean loss;
    data-parallel averaging of the ranks' gradients gives the global one)."""
    w1, b1 = w["fc1.weight"].astype(np.float64), w["fc1.bias"].astype(np.float64)
    w2, b2 = w["fc2.weight"].astype(np.float64), w["fc2.bias"].astype(np.float64)
    h = np.tanh(x @ w1.T + b1)
    y = h @ w2.T + b2
    n = x.shape[0]
    loss = 0.5 * float(np.sum((y - t) ** 2)) / n
    dy = (y - t) / n
    dz1 = (dy @ w2) * (1.0 - h * h)
    return loss, {"fc1.weight": dz1.T @ x, "fc1.bias": dz1.sum(0),
                  "fc2.weight": dy.T @ h, "fc2.bias": dy.sum(0)}


def config(stage: int, world: int, gas: int = 1, dtype: str = "fp32") -> Dict[str, Any]:
    """AdamW + WarmupLR + clipping (so lr and the global grad norm matter)."""
    micro = GLOBAL_BATCH // (world * gas)
    cfg: Dict[str, Any] = {
        "train_batch_size": GLOBAL_BATCH,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": gas,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8,
                                                  "weight_decay": 0.01}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 0.01,
                                                     "warmup_num_steps": 4, "warmup_type": "linear"}},
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": stage},
    }
    if stage == 3:
        # Partition every parameter (the default threshold would keep these tiny ones whole).
        cfg["zero_optimization"]["stage3_param_persistence_threshold"] = 0
    if dtype == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8, "loss_scale_window": 4, "hysteresis": 1}
    elif dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
    return cfg


def as_float64(view_array: np.ndarray, dtype: str) -> np.ndarray:
    """A working-weight view's numbers as float64 (bf16 views come as uint16 bits)."""
    if dtype == "bfloat16":
        return (view_array.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return view_array.astype(np.float64)


# ---- running workers ---------------------------------------------------------

def mpi_available() -> Optional[str]:
    """None when multi-rank runs can work here, else why not (for pytest.skip)."""
    if shutil.which("mpirun") is None:
        return "mpirun is not in PATH"
    import deepspeed_c
    if not deepspeed_c.build_info().get("mpi"):
        return "libdeepspeed_c was built without MPI"
    return None


def worker_env() -> Dict[str, str]:
    env = dict(os.environ)
    # Root in containers; 2 cores shared by the ranks; no library wait beyond the test's own limit.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", DS_COMM_TIMEOUT_MS="60000")
    env.setdefault("DS_LOG_LEVEL", "warn")
    # A launcher variable inherited from an outer mpirun would make the
    # one-process reference think it is one of several ranks.
    return env


def _run(cmd: List[str], env: Dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run `cmd` in its own process group; past `timeout` the whole group
    (ds-run, mpirun and every rank) is killed and the test fails as a hang."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        raise AssertionError(f"{' '.join(cmd)} did not finish within {timeout} s (a hang)\n"
                             f"stdout:\n{out}\nstderr:\n{err}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_ranks(worker: str, args: Sequence[str], ranks: int = 2, timeout: float = RUN_TIMEOUT,
              check: bool = True) -> subprocess.CompletedProcess:
    """`tools/ds-run -n RANKS python workers/WORKER ARGS`."""
    cmd = [sys.executable, DS_RUN, "-n", str(ranks), sys.executable, os.path.join(WORKERS, worker), *args]
    r = _run(cmd, worker_env(), timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def run_single(worker: str, args: Sequence[str], timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    """The same worker as one plain process (a world of one), no launcher."""
    env = worker_env()
    for k in [k for k in env if k.startswith(("OMPI_COMM_WORLD", "PMIX_", "PMI_", "SLURM_", "MV2_"))]:
        del env[k]
    cmd = [sys.executable, os.path.join(WORKERS, worker), *args]
    r = _run(cmd, env, timeout)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def load_rank(out_dir: str, rank: int) -> Dict[str, np.ndarray]:
    with np.load(os.path.join(out_dir, f"rank{rank}.npz")) as f:
        return {k: f[k] for k in f.files}


def bits(a: np.ndarray) -> bytes:
    """Exact bytes (so -0.0 != 0.0 and NaN payloads count)."""
    return np.ascontiguousarray(a).tobytes()


# ---- float64 reference (independent of the library) ---------------------------

def reference_lr(step: int) -> float:
    """The lr DeepSpeed's WarmupLR (linear, min 0, max 0.01, 4 warmup steps)
    gives optimizer step `step` (1-based): the first step runs at the
    scheduler's initial lr (its iteration -1 counts as 0), then iteration
    k = step - 2 gives 0.01 * min(1, k / 4) (checked against DeepSpeed 0.19.8)."""
    return 0.01 * min(1.0, max(step - 2, 0) / 4.0)


def reference_train(steps: int) -> Dict[str, Any]:
    """The config's training (AdamW, WarmupLR, clipping at 1.0) in float64 on the
    global batch of every step: params, per-step lr and pre-clip grad norm."""
    w = {n: v.astype(np.float64) for n, v in initial_params().items()}
    m = {n: np.zeros_like(v) for n, v in w.items()}
    v2 = {n: np.zeros_like(v) for n, v in w.items()}
    b1, b2, eps, wd = 0.9, 0.999, 1e-8, 0.01
    lrs, norms, losses = [], [], []
    for step in range(steps):
        x, t = global_batch(step)
        loss, g = loss_and_grads(w, x, t)
        norm = float(np.sqrt(sum(float(np.sum(gi * gi)) for gi in g.values())))
        coef = 1.0 / (norm + 1e-6)  # DeepSpeed: clip / (norm + 1e-6), applied when < 1
        if coef < 1.0:
            g = {n: gi * coef for n, gi in g.items()}
        lr = reference_lr(step + 1)
        k = step + 1
        for n in w:
            w[n] = w[n] * (1.0 - lr * wd)
            m[n] = b1 * m[n] + (1 - b1) * g[n]
            v2[n] = b2 * v2[n] + (1 - b2) * g[n] * g[n]
            mhat, vhat = m[n] / (1 - b1 ** k), v2[n] / (1 - b2 ** k)
            w[n] = w[n] - lr * mhat / (np.sqrt(vhat) + eps)
        lrs.append(lr)
        norms.append(norm)
        losses.append(loss)
    return {"params": w, "lr": np.asarray(lrs), "grad_norm": np.asarray(norms), "loss": np.asarray(losses)}
