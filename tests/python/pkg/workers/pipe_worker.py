"""Four ranks: PipeDataParallelTopology(2, 2) communicators, Comm.split, and a
2-stage TrainSchedule run over pipe_send/pipe_recv (through the Python
package), every result checked against the formula. Writes
rank<r>.ok into --out when every check passed (an assertion exits non-zero)."""
import argparse
import os

import numpy as np

import deepspeed_c as dsc

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--micro-batches", type=int, default=3)
args = ap.parse_args()

world = dsc.Comm.world()
r, n = world.rank, world.size
assert n == 4, f"run on 4 ranks, not {n}"
topo = dsc.PipeDataParallelTopology(2, 2)
coord = topo.get_coord(r)
pipe, data = topo.comm("pipe", world), topo.comm("data", world)
assert (pipe.size, pipe.rank) == (2, coord.pipe), (pipe.size, pipe.rank, coord)
assert (data.size, data.rank) == (2, coord.data), (data.size, data.rank, coord)
whole = topo.group_comm(["pipe", "data"], world)
assert whole.size == 4 and whole.rank == r

# split: colors by parity, keys reversed, so the higher world rank comes first
sub = world.split(r % 2, key=-r)
assert sub.size == 2 and sub.rank == (1 if r < 2 else 0), (r, sub.rank)
assert world.split(-1) is None

# p2p of two dtypes, and a shape mismatch that is named and leaves the stream aligned
stage, peer = coord.pipe, 1 - coord.pipe
if stage == 0:
    pipe.pipe_send(np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1), peer, tag=5)
    pipe.pipe_send(np.arange(4, dtype=np.int32) + r, peer, tag=6)
    pipe.pipe_send(np.ones(3, np.float32), peer, tag=7)
    pipe.pipe_send(np.full(2, 9.0, np.float32), peer, tag=7)
else:
    src = topo.get_rank(pipe=0, data=coord.data)
    a = dsc.pipe_recv(pipe, np.zeros((2, 3), np.float32), peer, tag=5)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3) * (src + 1))
    b = pipe.pipe_recv(np.zeros(4, np.int32), peer, tag=6)
    np.testing.assert_array_equal(b, np.arange(4, dtype=np.int32) + src)
    wrong = np.zeros(4, np.float32)
    try:
        pipe.pipe_recv(wrong, peer, tag=7)
        raise AssertionError("a shape mismatch was accepted")
    except dsc.InvalidArgumentError as e:
        assert "fp32 [3]" in str(e) and "fp32 [4]" in str(e), str(e)
    assert not wrong.any()
    np.testing.assert_array_equal(pipe.pipe_recv(np.zeros(2, np.float32), peer, tag=7), np.full(2, 9.0))

# a 2-stage 1F1B pipeline: stage 0 computes a = 2x, stage 1 y = a + 1 and the
# gradient g = 3y, which stage 0 receives back; every micro-batch checked.
M = args.micro_batches
sched = dsc.TrainSchedule(M, 2, stage)
nb = sched.num_pipe_buffers
act = np.zeros((nb, 2), np.float32)   # stage 0: its output; stage 1: its received input
res = np.zeros((nb, 2), np.float32)   # stage 1: y; stage 0: the gradient received
x_of = {}
grads = {}
seen = []
for ins in sched:
    seen.append(ins.name)
    b, mb = ins.buffer_id, ins.micro_batch
    if ins.name == "LoadMicroBatch" and stage == 0:
        x_of[b] = np.full(2, mb + 1 + 10 * coord.data, np.float32)
    elif ins.name == "ForwardPass":
        if stage == 0:
            act[b] = 2 * x_of[b]
        else:
            res[b] = act[b] + 1
    elif ins.name == "SendActivation":
        pipe.pipe_send(act[b], 1, tag=1)
    elif ins.name == "RecvActivation":
        pipe.pipe_recv(act[b], 0, tag=1)
    elif ins.name == "BackwardPass":
        if stage == 1:
            res[b] = 3 * res[b]
        else:
            grads[mb] = res[b].copy()
    elif ins.name == "SendGrad":
        pipe.pipe_send(res[b], 0, tag=2)
    elif ins.name == "RecvGrad":
        pipe.pipe_recv(res[b], 1, tag=2)
assert seen[-3:] == ["ReduceTiedGrads", "ReduceGrads", "OptimizerStep"], seen
if stage == 0:
    assert sorted(grads) == list(range(M)), grads
    for m, g in grads.items():
        np.testing.assert_array_equal(g, np.full(2, 3 * (2 * (m + 1 + 10 * coord.data) + 1), np.float32))

# Collectives on numpy arrays (float64 formula of every rank's values):
# ReduceGrads over the data axis as an avg, then the world's all_to_all / gather /
# reduce_scatter / broadcast.
if stage == 0:
    summed = data.all_reduce(np.stack([grads[m] for m in range(M)]).astype(np.float32), op="avg")
    want = np.mean([[np.full(2, 3 * (2 * (m + 1 + 10 * d) + 1)) for m in range(M)] for d in range(2)], axis=0)
    np.testing.assert_allclose(summed, want, rtol=1e-6)
mine = np.arange(4 * n, dtype=np.float32) + 100 * r
got = world.all_to_all_single(np.zeros(4 * n, np.float32), mine)
np.testing.assert_array_equal(got, np.concatenate([np.arange(4 * r, 4 * r + 4) + 100 * q for q in range(n)]))
gathered = world.all_gather_into_tensor(np.zeros((n, 3), np.int64), np.full(3, r, np.int64))
np.testing.assert_array_equal(gathered, np.repeat(np.arange(n)[:, None], 3, axis=1))
part = world.reduce_scatter_tensor(np.zeros(2, np.float32), np.arange(2 * n, dtype=np.float32) * (r + 1), op="max")
np.testing.assert_array_equal(part, np.arange(2 * r, 2 * r + 2, dtype=np.float32) * n)
np.testing.assert_array_equal(world.broadcast(np.full(5, float(r), np.float32), n - 1), np.full(5, n - 1.0))
world.barrier()
for c in (sub, whole, data, pipe):
    c.close()
open(os.path.join(args.out, f"rank{r}.ok"), "w").close()
