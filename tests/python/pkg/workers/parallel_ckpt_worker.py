"""Two ranks train the GPT of pipe_engine_data.py two steps as a pipeline
(--layout pipe: two stages) or tensor-parallel (--layout tp: autotp_size 2),
then save a checkpoint into --out (test_parallel_checkpoint_readers.py):
the checkpoint holds the logical (whole) model."""
import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pipe_engine_data as D  # noqa: E402

import deepspeed_c as dsc  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--layout", choices=["pipe", "tp"], required=True)
ap.add_argument("--out", required=True)
args = ap.parse_args()

world = dsc.Comm.world()
spec, config = dict(D.SPEC), copy.deepcopy(D.CONFIG)
if args.layout == "pipe":
    spec["pipeline"] = {"stages": 2, "partition_method": "parameters"}
else:
    config["tensor_parallel"] = {"autotp_size": 2}
e = dsc.Engine(config, comm=world, model=dsc.Model(spec))
for step in range(D.STEPS):
    ids, tgt = D.batch(step)
    if args.layout == "pipe":
        stage = e.pipe_info().stage_id
        e.train_batch(ids if stage == 0 else None, tgt if stage == 1 else None)
    else:
        for m in range(D.GAS):  # both ranks of the group take the same micro-batches
            rows = slice(m * D.MICRO, (m + 1) * D.MICRO)
            e.forward(ids[rows], tgt[rows])
            e.backward()
            e.step()
e.save_checkpoint(args.out)
e.close()
world.close()
