"""Rank 0 enters ds_step (a collective) while rank 1 never does; the test
sends SIGINT to rank 0, which must come back with a CommError instead of
waiting for the communicator's timeout. Rank 1 sleeps (it is killed when
rank 0 exits non-zero)."""
import os
import sys
import time

import numpy as np

import deepspeed_c as dsc

out_dir = sys.argv[1]
cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
engine = dsc.Engine(cfg)
engine.add_param("w", np.zeros(4, np.float32))
engine.init()
if engine.rank == 1:
    time.sleep(120)
    sys.exit(0)
engine.accumulate_grad("w", np.ones(4, np.float32))
engine.backward()
with open(os.path.join(out_dir, "rank0.pid.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(out_dir, "rank0.pid.tmp"), os.path.join(out_dir, "rank0.pid"))
t0 = time.monotonic()
try:
    engine.step()          # blocks: rank 1 never calls it
except dsc.CommError as exc:
    print(f"INTERRUPTED after {time.monotonic() - t0:.1f} s: CommError: {exc}; "
          f"cause {type(exc.__cause__).__name__}", flush=True)
    sys.exit(3)
print("step returned", flush=True)
