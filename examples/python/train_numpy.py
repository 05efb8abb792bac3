"""Train a small MLP with hand-written numpy gradients through deepspeed_c.Engine.

No torch: the host computes forward and backward with numpy; the engine owns
the weights, mixed precision, loss scaling, clipping, AdamW, the LR schedule
and checkpoints, exactly as DeepSpeed's engine does for a PyTorch model.

    python examples/python/train_numpy.py [--steps 300] [--dtype fp32|bf16|fp16] [--config ds_config.json]
    tools/ds-run -n 2 python examples/python/train_numpy.py      # data parallel, ZeRO from the config
"""
from __future__ import annotations

import argparse
import json

import numpy as np

import deepspeed_c as dsc

CONFIG = {
    "train_micro_batch_size_per_gpu": 32,
    "gradient_accumulation_steps": 1,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 3e-3,
                                                 "warmup_num_steps": 20}},
    "zero_optimization": {"stage": 1},
}
SIZES = [(16, 64), (64, 1)]  # a 16-64-1 MLP with tanh


def teacher(x):
    return np.sin(x[:, :4].sum(axis=1, keepdims=True)) + 0.5 * x[:, 4:5] ** 2


def as_f32(view):
    """A float32 copy of a view (fp16/bf16 working weights are converted by the library)."""
    if view.dtype == "float32":
        return view.numpy()
    out = np.empty(view.shape, np.float32)
    dsc.convert(view, out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--config", help="a DeepSpeed JSON config (default: the embedded one)")
    args = ap.parse_args()
    config = json.load(open(args.config)) if args.config else dict(CONFIG)
    if args.dtype != "fp32":
        config[args.dtype] = {"enabled": True}

    with dsc.Engine(config) as engine:
        rng = np.random.default_rng(0)   # the same initial weights on every rank
        names = []
        for i, (fan_in, fan_out) in enumerate(SIZES):
            engine.add_param(f"fc{i}.weight", (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
            engine.add_param(f"fc{i}.bias", np.zeros(fan_out, np.float32))
            names += [f"fc{i}.weight", f"fc{i}.bias"]
        engine.init()
        data_rng = np.random.default_rng(1 + engine.rank)   # each rank its own shard
        batch = engine.train_micro_batch_size_per_gpu
        losses = []
        for step in range(args.steps):
            x = data_rng.standard_normal((batch, 16)).astype(np.float32)
            y = teacher(x)
            w0, b0, w1, b1 = (as_f32(engine.param(n)) for n in names)
            h = np.tanh(x @ w0 + b0)
            pred = h @ w1 + b1
            loss = float(np.mean((pred - y) ** 2))
            losses.append(loss)
            # backward of loss * loss_multiplier (DeepSpeed's order: / gas, x loss scale)
            dpred = 2.0 * (pred - y) / batch * engine.loss_multiplier
            grads = {"fc1.weight": h.T @ dpred, "fc1.bias": dpred.sum(0)}
            dh = (dpred @ w1.T) * (1 - h * h)
            grads["fc0.weight"] = x.T @ dh
            grads["fc0.bias"] = dh.sum(0)
            for n in names:
                engine.accumulate_grad(n, grads[n].astype(np.float32), predivided=True)
            engine.backward()
            info = engine.step()
            if engine.rank == 0 and (step % 50 == 0 or step == args.steps - 1):
                print(f"step {step:4d}  loss {loss:.4f}  lr {info.lr:.2e}  scale {info.loss_scale:g}"
                      f"  skipped {engine.skipped_steps}", flush=True)
        tenth = max(len(losses) // 10, 1)
        first, last = np.mean(losses[:tenth]), np.mean(losses[-tenth:])
        if engine.rank == 0:
            verdict = "fell" if last < 0.9 * first else "did not fall"
            print(f"loss {verdict}: first tenth {first:.4f}, last tenth {last:.4f} (x{first / last:.2f})")
        if last >= 0.9 * first:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
