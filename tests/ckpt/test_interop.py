"""Interop: files this library writes load with the `safetensors` package.

ds-to-fp32's consolidated output equals ds_engine_get_full_fp32_param for
every parameter (trainable ones from the fp32 masters, the frozen one widened
from fp16); ds_save_16bit_model's file equals the working weights; the
checkpoint's own model.safetensors and optim_rank0.safetensors load too.

Usage: test_interop.py LIBDEEPSPEED_C.so DS_TO_FP32
Exit 77 (skipped) when safetensors or numpy is not importable.
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as exc:  # pragma: no cover
    print(f"SKIP: {exc}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ds_ctypes import Lib, tensor  # noqa: E402

CONFIG = json.dumps({
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
    "fp16": {"enabled": True, "initial_scale_power": 4},
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
})
SHAPES = {"enc.weight": (17, 5), "enc.bias": (5,), "head/w": (5, 3, 2), "frozen.table": (4, 4)}
FROZEN = {"frozen.table"}


def main():
    lib = Lib(sys.argv[1])
    tool = sys.argv[2]
    c = lib.lib
    rng = np.random.default_rng(3)
    e = lib.create(CONFIG)
    for name, shape in SHAPES.items():
        init = rng.standard_normal(shape).astype(np.float32)
        lib.check(c.ds_engine_add_param(e, name.encode(), ctypes.byref(tensor(init)),
                                        0 if name in FROZEN else 1), "add_param")
    lib.check(c.ds_engine_init(e), "init")
    scale = ctypes.c_float()
    for _ in range(5):
        lib.check(c.ds_engine_loss_scale(e, ctypes.byref(scale)), "loss_scale")
        for name, shape in SHAPES.items():
            if name in FROZEN:
                continue
            g = (rng.standard_normal(shape) * scale.value * 0.1).astype(np.float32)
            lib.check(c.ds_engine_accumulate_grad(e, name.encode(), ctypes.byref(tensor(g))), "grad")
        lib.check(c.ds_backward(e, None), "backward")
        lib.check(c.ds_step(e, None), "step")

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ckpt")
        lib.check(c.ds_save_checkpoint(e, ckpt.encode(), None, None), "save_checkpoint")
        out = os.path.join(tmp, "fp32.safetensors")
        run = subprocess.run([tool, ckpt, out], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"ds-to-fp32 failed: {run.stderr}")
            return 1
        fp32 = load_file(out)
        if set(fp32) != set(SHAPES):
            print(f"consolidated names {sorted(fp32)} != {sorted(SHAPES)}")
            failures += 1
        for name, shape in SHAPES.items():
            want = np.zeros(shape, dtype=np.float32)
            lib.check(c.ds_engine_get_full_fp32_param(e, name.encode(), ctypes.byref(tensor(want))), "get_full")
            got = fp32.get(name)
            if got is None or got.dtype != np.float32 or got.shape != shape or \
                    got.tobytes() != want.tobytes():
                print(f"{name}: ds-to-fp32 output differs from ds_engine_get_full_fp32_param")
                failures += 1

        lib.check(c.ds_save_16bit_model(e, tmp.encode(), b"model16.safetensors"), "save_16bit_model")
        w16 = load_file(os.path.join(tmp, "model16.safetensors"))
        model = load_file(os.path.join(ckpt, "global_step5", "model.safetensors"))
        for name, shape in SHAPES.items():
            from ds_ctypes import DLTensor  # noqa: E402
            view = DLTensor()
            lib.check(c.ds_engine_param_view(e, name.encode(), ctypes.byref(view)), "param_view")
            n = int(np.prod(shape))
            raw = ctypes.string_at(view.data + view.byte_offset, n * 2)
            for label, arrays in (("16-bit model", w16), ("checkpoint model", model)):
                got = arrays.get(name)
                if got is None or got.dtype != np.float16 or got.shape != shape or got.tobytes() != raw:
                    print(f"{name}: {label} file differs from the working weights")
                    failures += 1
        optim = load_file(os.path.join(ckpt, "global_step5", "optim_rank0.safetensors"))
        for name, shape in SHAPES.items():
            if name in FROZEN:
                continue
            n = int(np.prod(shape))
            want = np.zeros(shape, dtype=np.float32)
            lib.check(c.ds_engine_get_full_optimizer_state(e, name.encode(), b"exp_avg",
                                                           ctypes.byref(tensor(want))), "state")
            got = optim.get(f"{name}/0/exp_avg")
            if got is None or got.shape != (n,) or got.tobytes() != want.tobytes():
                print(f"{name}: optim_rank0 exp_avg differs")
                failures += 1
        with open(os.path.join(ckpt, "latest"), "rb") as f:
            if f.read() != b"global_step5":
                print("latest does not hold exactly 'global_step5'")
                failures += 1
    c.ds_engine_destroy(e)
    print(f"{len(SHAPES)} parameters checked, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
