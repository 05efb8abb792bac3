"""The GPT, config and batches of workers/pipe_engine_worker.py (two pipeline
stages on two ranks) and of its unsplit one-process reference in
test_pipe_engine.py."""
import numpy as np

SPEC = {"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16, "seed": 3,
        "dropout": 0.0}
MICRO, GAS, T, STEPS = 2, 2, 8, 2
CONFIG = {"train_micro_batch_size_per_gpu": MICRO, "gradient_accumulation_steps": GAS,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}


def batch(step):
    """Token ids and next-token targets [GAS * MICRO, T] of batch `step` (int64)."""
    rng = np.random.default_rng(100 + step)
    ids = rng.integers(0, SPEC["vocab_size"], size=(GAS * MICRO, T + 1))
    return np.ascontiguousarray(ids[:, :T]), np.ascontiguousarray(ids[:, 1:])
