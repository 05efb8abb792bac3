"""deepspeed_c.pipe and the newer Comm/Engine calls: every schedule stream and
topology DeepSpeed itself wrote into tests/data/pipe/ (through PipeSchedule's
iterator, steps() and the DeepSpeed-named Topology methods), Comm.split and
Topology.comm on a world of one, pipe_send/recv argument errors, and
Engine.offload_states/reload_states bit-identical around an evaluation."""
from __future__ import annotations

import os

import numpy as np
import pytest

import deepspeed_c as dsc
from conftest import REPO_ROOT

FIXTURES = os.path.join(REPO_ROOT, "tests", "data", "pipe")


def _blocks(name):
    block = None
    with open(os.path.join(FIXTURES, name)) as f:
        for line in f:
            f_ = line.split()
            if not f_ or f_[0] == "#":
                continue
            if f_[0] in ("S", "T", "P"):
                block = [line.rstrip("\n")]
            elif f_[0] == "E":
                yield block
            else:
                block.append(line.rstrip("\n"))


SCHEDULES = list(_blocks("schedules.txt"))
TOPOLOGIES = list(_blocks("topology.txt"))
PARTITIONS = list(_blocks("partitions.txt"))


def test_fixtures_present():
    assert len(SCHEDULES) > 100 and len(TOPOLOGIES) >= 5


@pytest.mark.parametrize("block", SCHEDULES, ids=lambda b: b[0][2:].replace(" ", "_"))
def test_schedule_stream_matches_deepspeed(block):
    _, kind, stages, micro, stage, buffers, steps = block[0].split()
    s = dsc.PipeSchedule(kind, int(micro), int(stages), int(stage))
    assert s.num_pipe_buffers == int(buffers) and s.num_steps == int(steps)
    want = [line[2:] for line in block[1:]]
    for _ in range(2):  # each loop starts over
        got = [f"{i.step} {i.name} {i.buffer_id} {i.micro_batch}" for i in s]
        assert got == want
    flat = [f"{i.step} {i.name} {i.buffer_id} {i.micro_batch}" for step in s.steps() for i in step]
    assert flat == want


@pytest.mark.parametrize("block", PARTITIONS[::7])
def test_partition_matches_deepspeed(block):
    _, method, stages, layers = block[0].split()
    lines = {l.split()[0]: l.split()[1:] for l in block[1:]}
    counts = [int(w) for w in lines["W"]] if "W" in lines else None
    names = lines.get("N")
    want = [int(p) for p in lines["R"]]
    assert dsc.pipe.partition_layers(method, int(stages), num_layers=int(layers), param_counts=counts,
                                     type_names=names) == want


def test_partition_errors_are_named():
    assert len(PARTITIONS) >= 100
    with pytest.raises(dsc.InvalidArgumentError, match="matches no layer"):
        dsc.pipe.partition_layers("type:moe", 2, type_names=["Embedding", "Linear"])
    with pytest.raises(dsc.InvalidArgumentError, match="param_counts"):
        dsc.pipe.partition_layers("parameters", 2, num_layers=3)
    with pytest.raises(dsc.UnsupportedError, match="profile"):
        dsc.pipe.partition_layers("profile", 2, num_layers=3)
    with pytest.raises(ValueError, match="num_layers"):
        dsc.pipe.partition_layers("uniform", 2)
    assert dsc.pipe.partition_layers("uniform", 2, num_layers=5) == [0, 3, 5]


def test_schedule_named_tuple_and_errors():
    # hand-checked: the first of 2 stages, 2 micro-batches (DeepSpeed's TrainSchedule)
    names = [i.name for i in dsc.TrainSchedule(2, 2, 0)]
    assert names == ["LoadMicroBatch", "ForwardPass", "SendActivation", "LoadMicroBatch", "ForwardPass",
                     "RecvGrad", "SendActivation", "BackwardPass", "RecvGrad", "BackwardPass",
                     "ReduceTiedGrads", "ReduceGrads", "OptimizerStep"]
    i = next(iter(dsc.InferenceSchedule(1, 1, 0)))
    assert isinstance(i, dsc.PipeInstr) and i.type == 1 and i._asdict()["name"] == "LoadMicroBatch"
    with pytest.raises(dsc.InvalidArgumentError, match="stage_id"):
        dsc.TrainSchedule(4, 2, 2)
    with pytest.raises(dsc.InvalidArgumentError, match="micro_batches"):
        dsc.DataParallelSchedule(0, 1, 0)
    with pytest.raises(ValueError, match="kind"):
        dsc.PipeSchedule("zigzag", 1, 1, 0)
    s = dsc.TrainSchedule(2, 2, 0)
    with pytest.raises(dsc.InvalidArgumentError, match="step"):
        s.step_instrs(s.num_steps)


@pytest.mark.parametrize("block", TOPOLOGIES, ids=lambda b: b[0][2:].replace(" ", "_"))
def test_topology_matches_deepspeed(block):
    head = block[0].split()
    n = int(head[1])
    axes, dims = head[2:2 + n], [int(d) for d in head[2 + n:2 + 2 * n]]
    t = dsc.ProcessTopology(axes, dims)
    assert t.world_size() == int(head[2 + 2 * n]) and t.get_axis_names() == axes
    for line in block[1:]:
        f = line.split()
        if f[0] == "C":
            rank, coord = int(f[1]), [int(c) for c in f[2:]]
            assert list(t.get_coord(rank)) == coord
            assert t.get_rank(**dict(zip(axes, coord))) == rank
            assert t.get_coord(rank)._fields == tuple(axes)
        elif f[0] == "L":
            want = [[int(r) for r in g.split()] for g in line[2 + len(f[1]) + 1:].split("|")]
            assert t.get_axis_comm_lists(f[1]) == want
        elif f[0] == "R":
            assert t.get_rank_repr(int(f[1])) == ("" if f[2] == "-" else f[2])
        elif f[0] == "F":
            colon = f.index(":")
            crit = {c.split("=")[0]: int(c.split("=")[1]) for c in f[1:colon]}
            assert t.filter_match(**crit) == [int(r) for r in f[colon + 1:]]


def test_topology_round_trips_and_errors():
    t = dsc.PipeModelDataParallelTopology(num_pp=2, num_mp=3, num_dp=2)
    assert t.axes == ["pipe", "data", "model"] and t.dims == [2, 2, 3]
    for r in range(12):
        c = t.get_coord(r)
        assert (c.pipe, c.data, c.model) == (r // 6, (r // 3) % 2, r % 3)  # last axis fastest
        assert t.get_rank(**c._asdict()) == r
    assert t.get_dim("expert") == 0 and t.get_axis_comm_lists("expert") == []
    assert t.get_axis_list("model", 2) == [2, 5, 8, 11]
    assert t.get_rank_repr(11, omit_axes=["model"]) == "pipe_01-data_01"
    assert t.get_rank_repr(11, omit_axes=None) == "pipe_01-data_01-model_02"
    d = dsc.Topology.default(12)
    assert (d.get_dim("pipe"), d.get_dim("data")) == (6, 2)
    assert dsc.PipeDataParallelTopology(3, 2).get_axis_comm_lists("data") == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(dsc.InvalidArgumentError, match="pipe"):
        dsc.ProcessTopology(["pipe", "pipe"], [2, 2])
    with pytest.raises(ValueError, match="dims"):
        dsc.ProcessTopology(["pipe", "data"], [2])
    with pytest.raises(dsc.InvalidArgumentError, match="data"):
        t.get_rank(pipe=0, data=2, model=0)
    with pytest.raises(ValueError, match="missing"):
        t.get_rank(pipe=0)
    with pytest.raises(dsc.InvalidArgumentError, match="nope"):
        t.filter_match(nope=0)
    with pytest.raises(dsc.InvalidArgumentError, match="rank"):
        t.get_coord(12)


def test_split_topology_comm_and_p2p_errors_on_a_world_of_one():
    world = dsc.Comm.world(backend="local")
    sub = world.split(0)
    assert sub is not None and (sub.rank, sub.size) == (0, 1)
    assert world.split(-1) is None
    t = dsc.PipeDataParallelTopology(1, 1)
    assert t.comm("pipe", world).size == 1
    assert t.group_comm(["pipe", "data"], world).size == 1
    with pytest.raises(dsc.InvalidArgumentError, match="has 2"):
        dsc.PipeDataParallelTopology(2, 1).comm("pipe", world)
    x = np.arange(3, dtype=np.float32)
    with pytest.raises(dsc.InvalidArgumentError, match="peer"):
        world.pipe_send(x, 0)
    with pytest.raises(dsc.InvalidArgumentError, match="peer"):
        dsc.pipe_recv(world, x, 1)


MLP = {"type": "sequential", "seed": 3, "loss": "mse", "layers": [
    {"type": "linear", "in_features": 3, "out_features": 8}, {"type": "gelu"},
    {"type": "linear", "in_features": 8, "out_features": 2}]}
ADAM = {"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}


def _masters(e):
    return [e.get_full_fp32_param(p.name).copy() for p in e.named_parameters()]


def test_offload_reload_bit_identical_around_eval(tmp_path):
    a, b = dsc.Engine(ADAM, model=dsc.Model(MLP)), dsc.Engine(ADAM, model=dsc.Model(MLP))
    x = (0.1 * np.arange(12, dtype=np.float32) - 0.5).reshape(4, 3)
    y = (0.2 * (np.arange(8) % 3)).astype(np.float32).reshape(4, 2)

    def train(e):
        loss = float(e.forward(x, y))
        e.backward()
        e.step()
        return loss

    for _ in range(3):
        assert train(a) == train(b)
    before = _masters(a)
    a.offload_states(include=[dsc.OffloadStateTypeEnum.optim_states, "hp_params", "lp_grads"],
                     device=dsc.OffloadDeviceEnum.nvme, nvme_path=str(tmp_path))
    assert a.disk_report()["optimizer_state_bytes"] > 0
    a.eval(); b.eval()
    assert float(a.forward(x, y)) == float(b.forward(x, y))
    a.train(); b.train()
    a.reload_states()
    for m, n in zip(_masters(a), before):
        np.testing.assert_array_equal(m, n)
    a.offload_states(device="nvme", nvme_path=str(tmp_path))  # every state
    with pytest.raises(dsc.InvalidStateError, match="reload_states"):
        a.forward(x, y)
    a.reload_states(non_blocking=True)
    for _ in range(2):
        assert train(a) == train(b)
    for m, n in zip(_masters(a), _masters(b)):
        np.testing.assert_array_equal(m, n)
    a.offload_states()  # DeepSpeed's defaults: every state to the CPU, where they already are
    a.empty_partition_cache()
    with pytest.raises(ValueError, match="include"):
        a.offload_states(include=["moments"])
    with pytest.raises(ValueError, match="device"):
        a.offload_states(device="gpu")
    with pytest.raises(dsc.InvalidArgumentError, match="missing"):
        a.offload_states(device="nvme", nvme_path=str(tmp_path / "missing"))
    assert train(a) == train(b)


def test_four_ranks_topology_split_p2p_and_a_1f1b_pipeline(tmp_path):
    """workers/pipe_worker.py on 4 ranks: topology communicators, split, typed
    p2p with a named mismatch, and a TrainSchedule driven over pipe_send/recv."""
    import multirank_helpers as H
    why = H.mpi_available()
    if why:
        pytest.skip(why)
    H.run_ranks("pipe_worker.py", ["--out", str(tmp_path)], ranks=4)
    assert sorted(os.listdir(tmp_path)) == [f"rank{r}.ok" for r in range(4)]
