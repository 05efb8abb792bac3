"""TensorBoard event files written by the engine (src/monitor/event_file.cpp:
hand-encoded protobuf in TFRecord framing) read back with tensorboard's own
EventAccumulator: the tags, steps (global_samples) and values DeepSpeed's
engine writes, against the float64 WarmupLR formula; the CSV monitor's
files of the same run agree. Drives the engine through the C ABI (ctypes).

Usage: test_tensorboard_readback.py LIBDEEPSPEED_C.so
Exit 77 (skipped) when numpy or tensorboard is not importable
(scripts/python_env.sh installs tensorboard from PyPI).
"""
import csv
import ctypes
import json
import math
import os
import sys
import tempfile

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as exc:  # pragma: no cover
    print(f"SKIP: {exc}")
    sys.exit(77)

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ds_ctypes import Lib, StepInfo, tensor  # noqa: E402

MICRO, GAS, BOUNDARIES, WARMUP = 3, 2, 6, 4


def warmup_lr(k):
    # WarmupLR, linear, 0 -> 0.1 over WARMUP steps: the k-th schedule step (from 0) sets 0.1 * min(k, WARMUP) / WARMUP.
    return 0.1 * min(k, WARMUP) / WARMUP


def main():
    lib = Lib(sys.argv[1])
    out = tempfile.mkdtemp(prefix="ds_tb_readback_")
    cfg = {"train_micro_batch_size_per_gpu": MICRO, "gradient_accumulation_steps": GAS,
           "wall_clock_breakdown": True,
           "fp16": {"enabled": True, "initial_scale_power": 5},
           "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 0.1,
                                                        "warmup_num_steps": WARMUP, "warmup_type": "linear"}},
           "tensorboard": {"enabled": True, "output_path": out, "job_name": "tbjob"},
           "csv_monitor": {"enabled": True, "output_path": out, "job_name": "csvjob"}}
    e = lib.create(json.dumps(cfg))
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    lib.check(lib.lib.ds_engine_add_param(e, b"w", ctypes.byref(tensor(w)), 1), "add_param")
    lib.check(lib.lib.ds_engine_init(e), "init")
    for _ in range(BOUNDARIES * GAS):
        g = (0.01 * rng.standard_normal((4, 2))).astype(np.float32)
        lib.check(lib.lib.ds_engine_accumulate_grad(e, b"w", ctypes.byref(tensor(g))), "accumulate_grad")
        lib.check(lib.lib.ds_backward(e, None), "backward")
        info = StepInfo()
        info.struct_size = ctypes.sizeof(StepInfo)
        lib.check(lib.lib.ds_step(e, ctypes.byref(info)), "step")
    lib.lib.ds_engine_destroy(e)

    tb_dir = os.path.join(out, "tbjob")
    files = os.listdir(tb_dir)
    assert len(files) == 1 and files[0].startswith("events.out.tfevents."), files
    acc = event_accumulator.EventAccumulator(tb_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    want = {"Train/Samples/lr", "Train/Samples/loss_scale"} | {
        "Train/Samples/elapsed_time_ms_" + n
        for n in ("forward", "backward", "backward_inner", "backward_allreduce", "step")}
    assert tags == want, tags

    lr = acc.Scalars("Train/Samples/lr")
    assert [s.step for s in lr] == [MICRO * GAS * (k + 1) for k in range(BOUNDARIES)], [s.step for s in lr]
    for k, s in enumerate(lr):
        assert math.isclose(s.value, warmup_lr(k), rel_tol=1e-6, abs_tol=1e-9), (k, s.value)
    assert [s.value for s in acc.Scalars("Train/Samples/loss_scale")] == [32.0] * BOUNDARIES
    step_ms = acc.Scalars("Train/Samples/elapsed_time_ms_step")
    assert len(step_ms) == BOUNDARIES and all(s.value >= 0.0 for s in step_ms)
    assert all(b.wall_time >= a.wall_time for a, b in zip(lr, lr[1:]))

    with open(os.path.join(out, "csvjob", "Train_Samples_lr.csv"), newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "lr"], rows[0]
    assert [int(r[0]) for r in rows[1:]] == [s.step for s in lr]
    for r, s in zip(rows[1:], lr):
        assert math.isclose(float(r[1]), s.value, rel_tol=1e-6, abs_tol=1e-9)
    print(f"OK: {len(tags)} tags, {len(lr)} lr points read back by tensorboard's EventAccumulator")


if __name__ == "__main__":
    main()
