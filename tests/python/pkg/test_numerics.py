"""The engine driven from numpy matches a float64 AdamW written in the test
(DeepSpeed's order: loss x scale/gas, clip by the global norm, WarmupLR)."""
from __future__ import annotations

import math

import numpy as np

import deepspeed_c as dsc


def _warmup_lr(step, min_lr, max_lr, warmup, log=True):
    # DeepSpeed WarmupLR (warmup_type "log"): gamma = log(step+1)/log(warmup)
    if step < warmup:
        gamma = math.log(step + 1) / math.log(warmup) if log else step / warmup
        return min_lr + (max_lr - min_lr) * gamma
    return max_lr


def test_adamw_clip_warmup_matches_float64():
    cfg = {"train_batch_size": 2, "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 0.5,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.99], "eps": 1e-8,
                                                     "weight_decay": 0.1}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 1e-2,
                                                        "warmup_num_steps": 5}}}
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    p = w0.astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    with dsc.Engine(cfg) as e:
        e.add_param("w", w0)
        e.init()
        for step in range(12):
            gsum = np.zeros_like(p)
            for _micro in range(2):
                g = rng.standard_normal((5, 3)).astype(np.float32)
                e.accumulate_grad("w", g)
                gsum += g.astype(np.float64)
                e.backward()
                info = e.step()
            g = gsum / 2
            norm = float(np.sqrt((g * g).sum()))
            assert math.isclose(info.grad_norm, norm, rel_tol=1e-6)
            g = g * min(1.0, 0.5 / (norm + 1e-6))
            # DeepSpeed: the schedule starts at iteration -1 (lr = min_lr) and
            # steps after each optimizer step, so step k uses iteration k - 1.
            lr = 0.0 if step == 0 else _warmup_lr(step - 1, 0.0, 1e-2, 5)
            assert math.isclose(info.lr, lr, rel_tol=1e-12, abs_tol=1e-15)
            t = step + 1
            p = p * (1 - lr * 0.1)
            m = 0.9 * m + 0.1 * g
            v = 0.99 * v + 0.01 * g * g
            denom = np.sqrt(v / (1 - 0.99 ** t)) + 1e-8
            p = p - (lr / (1 - 0.9 ** t)) * m / denom
            got = e.get_full_fp32_param("w").astype(np.float64)
            np.testing.assert_allclose(got, p, rtol=2e-6, atol=1e-7)
        assert e.global_steps == 12
