#!/usr/bin/env python3
"""Writes the pipeline fixtures in tests/data/pipe/ from DeepSpeed itself.

The fixtures are DeepSpeed's own output (an independent reference for
src/pipe): run with a Python that has deepspeed installed, e.g.
    ~/.cache/deepspeed_c/diffvenv/bin/python tests/tools/gen_pipe_fixtures.py

schedules.txt, one schedule per block:
    S <kind> <stages> <micro_batches> <stage_id> <num_pipe_buffers> <steps>
    I <step> <instruction> <buffer_id or -1> <micro_batch or -1>
    E
kind: train (TrainSchedule), inference (InferenceSchedule), data_parallel
(DataParallelSchedule). Instructions are DeepSpeed's class names in the order
steps() yields them. micro_batch is not part of DeepSpeed's instructions; it is
derived here from DeepSpeed's own step mapping: TrainSchedule's
_step_to_micro_batch (the previous step's micro-batch for SendActivation and
SendGrad), step - stage_id for InferenceSchedule (minus one for
SendActivation), the step for DataParallelSchedule, -1 for the reductions and
the optimizer step.

topology.txt, one topology per block:
    T <n_axes> <axis names...> <dims...> <world_size>
    C <rank> <coord per axis...>
    L <axis> <ranks of every comm list, lists separated by '|'>
    R <rank> <get_rank_repr(rank) or '-' when empty>
    F <axis>=<idx> ... : <filter_match ranks>
    E
"""
import logging
import os
import sys

logging.disable(logging.WARNING)
from deepspeed.runtime.pipe import schedule as ds_schedule  # noqa: E402
from deepspeed.runtime.pipe import topology as ds_topology  # noqa: E402
import deepspeed  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "pipe")

SEND_FROM_PREV = ("SendActivation", "SendGrad")


def micro_batch_of(kind, sched, step, name, prev_mb):
    if name in ("ReduceTiedGrads", "ReduceGrads", "OptimizerStep"):
        return -1
    if kind == "train":
        mb, _ = sched._step_to_micro_batch(step)
        return prev_mb if name in SEND_FROM_PREV else mb
    if kind == "inference":
        mb = step - sched.stage_id
        return mb - 1 if name == "SendActivation" else mb
    return step


def dump_schedule(out, kind, cls, stages, micro_batches, stage_id):
    sched = cls(micro_batches=micro_batches, stages=stages, stage_id=stage_id)
    steps = list(sched.steps())
    out.write(f"S {kind} {stages} {micro_batches} {stage_id} {sched.num_pipe_buffers()} {len(steps)}\n")
    prev_mb = -1
    for step, cmds in enumerate(steps):
        for c in cmds:
            name = type(c).__name__
            buf = c.kwargs.get("buffer_id", -1) if hasattr(c, "kwargs") else -1
            out.write(f"I {step} {name} {buf} {micro_batch_of(kind, sched, step, name, prev_mb)}\n")
        if kind == "train":
            prev_mb = sched._step_to_micro_batch(step)[0]
    out.write("E\n")


def dump_topology(out, axes, dims, filters):
    topo = ds_topology.ProcessTopology(axes=axes, dims=dims)
    out.write(f"T {len(axes)} {' '.join(axes)} {' '.join(map(str, dims))} {topo.world_size()}\n")
    for r in range(topo.world_size()):
        c = topo.get_coord(r)
        out.write(f"C {r} {' '.join(str(getattr(c, a)) for a in axes)}\n")
    for a in axes:
        lists = topo.get_axis_comm_lists(a)
        out.write(f"L {a} {' | '.join(' '.join(map(str, l)) for l in lists)}\n")
    for r in range(topo.world_size()):
        out.write(f"R {r} {topo.get_rank_repr(r) or '-'}\n")
    for f in filters:
        ranks = topo.filter_match(**f)
        crit = " ".join(f"{k}={v}" for k, v in f.items())
        out.write(f"F {crit} : {' '.join(map(str, ranks))}\n")
    out.write("E\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    header = f"# DeepSpeed {deepspeed.__version__} output, written by tests/tools/gen_pipe_fixtures.py; do not edit\n"
    with open(os.path.join(OUT, "schedules.txt"), "w") as out:
        out.write(header)
        for kind, cls in (("train", ds_schedule.TrainSchedule), ("inference", ds_schedule.InferenceSchedule),
                          ("data_parallel", ds_schedule.DataParallelSchedule)):
            for stages in (1, 2, 3, 4, 5):
                for micro_batches in (1, 2, 3, 4, 8):
                    for stage_id in range(stages):
                        dump_schedule(out, kind, cls, stages, micro_batches, stage_id)
    with open(os.path.join(OUT, "topology.txt"), "w") as out:
        out.write(header)
        dump_topology(out, ["pipe", "data"], [2, 2], [{"pipe": 1}, {"data": 0}])
        dump_topology(out, ["pipe", "data"], [4, 2], [{"pipe": 3}])
        dump_topology(out, ["pipe", "data", "model"], [2, 2, 2], [{"pipe": 0, "data": 1}, {"model": 1}])
        dump_topology(out, ["pipe", "data", "model"], [3, 1, 2], [{"data": 0, "model": 0}])
        dump_topology(out, ["x", "y"], [2, 3], [{"x": 0}, {"y": 0}])
        dump_topology(out, ["a", "b"], [2, 2], [{"a": 1, "b": 1}])
        dump_topology(out, ["pipe", "data", "model", "expert"], [2, 3, 2, 2], [{"expert": 1, "pipe": 0}])
        dump_topology(out, ["model"], [5], [{}])
        # PipeModelDataParallelTopology's argument order (pp, mp, dp) -> dims [pp, dp, mp]
        t = ds_topology.PipeModelDataParallelTopology(num_pp=2, num_mp=3, num_dp=2)
        dump_topology(out, t.get_axis_names(), t.dims, [{"data": 1}])
    return 0


if __name__ == "__main__":
    sys.exit(main())
