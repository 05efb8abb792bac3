"""Two ranks, one GPT cut into two pipeline stages (test_pipe_engine.py):
eval_batch, then two train_batch calls through the Python package, with the
first stage given only the inputs and the last only the targets. Writes
rank<r>.npz (the losses, pipe_info before and after, global_steps) into --out."""
import argparse
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pipe_engine_data as D  # noqa: E402

import deepspeed_c as dsc  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
args = ap.parse_args()

world = dsc.Comm.world()
r = world.rank  # the engine's rank is its data-parallel one (0 on both stages here)
model = dsc.Model(dict(D.SPEC, pipeline={"stages": 2, "partition_method": "parameters"}))
e = dsc.Engine(D.CONFIG, comm=world, model=model)
before = e.pipe_info()


def fed(step):
    ids, tgt = D.batch(step)
    return (ids if before.stage_id == 0 else None), (tgt if before.stage_id == 1 else None)


eval_loss = e.eval_batch(*fed(0))
losses = [e.train_batch(*fed(step)) for step in range(D.STEPS)]
after = e.pipe_info()
np.savez(os.path.join(args.out, f"rank{r}.npz"), eval_loss=eval_loss, losses=np.array(losses),
         before=np.array(dataclasses.astuple(before), np.float64),
         after=np.array(dataclasses.astuple(after), np.float64), global_steps=e.global_steps)
e.close()
world.close()
