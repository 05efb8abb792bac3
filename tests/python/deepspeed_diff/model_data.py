"""The model and data both sides of the DeepSpeed differential train on.

Everything is generated from numpy's PCG64 with fixed seeds and copied into
the torch module, so the two processes (DeepSpeed and deepspeed_c) start from
bit-identical float32 weights and see bit-identical batches, independent of
torch's own RNG and its version.
"""
from __future__ import annotations

import numpy as np

IN_DIM, HIDDEN, OUT_DIM = 16, 32, 4
MICRO_BATCH = 4
WEIGHT_SEED = 1234
DATA_SEED = 5678


def build_model(torch):
    """Linear(16,32)+bias -> LayerNorm(32) -> Tanh -> Linear(32,32)+bias -> Tanh -> Linear(32,4)+bias."""
    nn = torch.nn
    model = nn.Sequential(
        nn.Linear(IN_DIM, HIDDEN),
        nn.LayerNorm(HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, OUT_DIM),
    )
    rng = np.random.Generator(np.random.PCG64(WEIGHT_SEED))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                bound = 1.0 / np.sqrt(p.shape[1])
                value = rng.uniform(-bound, bound, size=tuple(p.shape))
            elif name.startswith("1."):  # LayerNorm: weight near 1, bias near 0
                base = 1.0 if name.endswith("weight") else 0.0
                value = base + 0.1 * rng.standard_normal(size=tuple(p.shape))
            else:
                value = 0.1 * rng.standard_normal(size=tuple(p.shape))
            p.copy_(torch.from_numpy(value.astype(np.float32)))
    return model


def micro_batches(count: int):
    """`count` (x, y) float32 numpy pairs, one per micro-step."""
    rng = np.random.Generator(np.random.PCG64(DATA_SEED))
    out = []
    for _ in range(count):
        x = rng.standard_normal(size=(MICRO_BATCH, IN_DIM)).astype(np.float32)
        y = rng.standard_normal(size=(MICRO_BATCH, OUT_DIM)).astype(np.float32)
        out.append((x, y))
    return out
