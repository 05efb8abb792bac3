"""Per-call overhead of the Python package, measured in one run.

    python bench/python/bench_call_overhead.py [--calls 200000]

Prints, in microseconds per call (median of interleaved rounds):
  noop       a no-op C function through the same SWIG machinery (the floor)
  getter     Engine.global_steps (Python layer + lock + one C getter)
  ll_step    ds_backward + ds_step straight through the SWIG module on a
             one-element model (the C calls, the GIL released twice)
  step       Engine.backward() + Engine.step() on the same model (Python layer,
             lock, StepInfo)
and step - ll_step: what the Python layer adds to a micro-step.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

import deepspeed_c as dsc
from deepspeed_c._native import ll


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def per_call_us(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    info = dsc.build_info()
    print(f"cpu: {cpu_model()}  simd: {info['simd']}  threads: {os.environ.get('OMP_NUM_THREADS', info['omp_max_threads'])}"
          f"  python {platform.python_version()}  deepspeed_c {dsc.__version__}")
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 0.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
    e = dsc.Engine(cfg)
    e.add_param("w", np.zeros(1, np.float32))
    e.init()
    h = e._h()
    cases = {
        "noop": lambda: ll.noop(h),
        "getter": lambda: e.global_steps,
        "ll_step": lambda: (ll.ds_backward(h, None), ll.ds_step(h)),
        "step": lambda: (e.backward(), e.step()),
    }
    results = {k: [] for k in cases}
    for _ in range(args.rounds):          # interleaved rounds, median per case
        for name, fn in cases.items():
            results[name].append(per_call_us(fn, args.calls))
    med = {k: statistics.median(v) for k, v in results.items()}
    for k, v in med.items():
        print(f"{k:8s} {v:7.3f} us/call   (min {min(results[k]):.3f}, max {max(results[k]):.3f})")
    print(f"Python layer on a step: step - ll_step = {med['step'] - med['ll_step']:.3f} us; "
          f"step / noop = {med['step'] / med['noop']:.1f}x")
    print(json.dumps({"us_per_call": med}))
    e.close()


if __name__ == "__main__":
    main()
