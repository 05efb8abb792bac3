"""One rank of test_torch_multirank.py (started by tools/ds-run): trains the
shared MLP on its half of every batch through deepspeed_c.torch.initialize
and saves its final parameters to ``<out>.rank<r>``."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepspeed_c  # noqa: E402
import deepspeed_c.torch as ds  # noqa: E402
import torch_helpers as th  # noqa: E402

STEPS = 10


def main() -> None:
    stage, out = int(sys.argv[1]), sys.argv[2]
    comm = deepspeed_c.Comm.world()
    try:
        model = th.mlp()
        cfg = th.config(gas=2, micro=4, zero_optimization={"stage": stage})
        try:
            engine, *_ = ds.initialize(model=model, config=cfg, comm=comm)
        except deepspeed_c.UnsupportedError as e:
            with open(f"{out}.rank{comm.rank}.unsupported", "w") as f:
                f.write(str(e))
            return
        r = engine.global_rank
        for x, y in th.batches(2 * STEPS, batch=8):
            engine.backward(th.mse(engine, x[4 * r:4 * (r + 1)], y[4 * r:4 * (r + 1)]))
            engine.step()
        torch.save(th.snapshot(model), f"{out}.rank{r}")
    finally:
        comm.finalize()


if __name__ == "__main__":
    main()
