"""Trains the MLP of multirank_helpers with deepspeed_c.Engine on however many
ranks started it (tools/ds-run -n N, or one plain process) and writes
OUT/rank<r>.npz: the final fp32 master weights, per-step lr, grad norm, loss
scale, skipped flag and local loss.

  mlp_worker.py --out DIR --stage S [--dtype fp32|fp16|bf16] [--gas G] [--steps N]
                [--comm world|mpi4py|comm] [--save DIR --save-at K] [--load DIR --start K]
                [--fail-rank R] [--leak]

--comm: world = Engine(cfg) (the engine's default communicator, the launcher's
world); comm = Engine(cfg, comm=deepspeed_c.Comm.world()) then finalize();
mpi4py = Engine(cfg, comm=mpi4py.MPI.COMM_WORLD).
--save/--save-at: save a checkpoint after step K (and record the weights then).
--load/--start: load that checkpoint first, then train steps K..N.
--fail-rank: that rank raises after init, the others go on into a collective.
--leak: keep an extra reference to the engine so it is never destroyed.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import multirank_helpers as H  # noqa: E402

import deepspeed_c as dsc  # noqa: E402


def make_engine(args, world_hint):
    comm = None
    if args.comm == "mpi4py":
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        world_hint = comm.Get_size()
    elif args.comm == "comm":
        comm = dsc.Comm.world()
        world_hint = comm.size
    cfg = H.config(args.stage, world_hint, args.gas, args.dtype)
    return dsc.Engine(cfg, comm=comm), comm


def working_weights(engine, stage, views):
    """float64 copies of the working weights for the forward. ZeRO 0-2: the
    views taken once after init (they alias the engine's weights for its
    life); ZeRO 3: gathered around the read, as DeepSpeed's GatheredParameters."""
    if stage == 3:
        with engine.gathered(H.NAMES):
            return {n: H.as_float64(engine.param(n).numpy(), engine.param(n).dtype) for n in H.NAMES}
    return {n: H.as_float64(v.numpy(), v.dtype) for n, v in views.items()}


def full_params(engine):
    return {n: engine.get_full_fp32_param(n) for n in H.NAMES}  # collective when partitioned


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--stage", type=int, required=True)
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--gas", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--comm", default="world", choices=["world", "comm", "mpi4py"])
    p.add_argument("--save", default=None)
    p.add_argument("--save-at", type=int, default=None)
    p.add_argument("--load", default=None)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--fail-rank", type=int, default=None)
    p.add_argument("--leak", action="store_true")
    args = p.parse_args()

    world_hint = int(os.environ.get("WORLD_SIZE", "1"))  # set by ds-run; checked against the engine below
    engine, comm = make_engine(args, world_hint)
    rank, world = engine.rank, engine.world_size
    assert world == world_hint or args.comm != "world", (world, world_hint)
    for name, value in H.initial_params().items():
        engine.add_param(name, value)
    engine.init()
    if args.leak:
        import ctypes
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine))  # never freed: the exit must cope
    if args.fail_rank == rank:
        raise RuntimeError(f"rank {rank} fails on purpose after init")

    rec = {k: [] for k in ("lr", "grad_norm", "loss_scale", "skipped", "loss")}
    if args.load:
        path, client = engine.load_checkpoint(args.load)
        assert client == {"saved_at": args.start}, client
        rec_loaded = full_params(engine)
    views = {} if args.stage == 3 else {n: engine.param(n) for n in H.NAMES}
    for step in range(args.start, args.steps):
        losses = 0.0
        for micro in range(args.gas):
            w = working_weights(engine, args.stage, views)
            x, t = H.local_batch(step, micro, rank, world, args.gas)
            loss, grads = H.loss_and_grads(w, x, t)
            losses += loss
            mult = engine.loss_multiplier  # loss_scale / gas: DeepSpeed's backward scaling
            for n in H.NAMES:
                engine.accumulate_grad(n, (grads[n] * mult).astype(np.float32), predivided=True)
            engine.backward()
            info = engine.step()
        assert info.stepped and info.global_step == step + 1, info
        for k, v in (("lr", info.lr), ("grad_norm", info.grad_norm), ("loss_scale", info.loss_scale),
                     ("skipped", float(info.skipped)), ("loss", losses / args.gas)):
            rec[k].append(v)
        if args.save and args.save_at == step + 1:
            engine.save_checkpoint(args.save, client_state={"saved_at": step + 1})
            for n, v in full_params(engine).items():
                rec["saved." + n] = v
    out = {k: np.asarray(v, dtype=np.float64) if not k.startswith("saved.") else v for k, v in rec.items()}
    out.update({"param." + n: v for n, v in full_params(engine).items()})
    if args.load:
        out.update({"loaded." + n: v for n, v in rec_loaded.items()})
    out["world"] = np.asarray([world, engine.global_steps, engine.skipped_steps])
    os.makedirs(args.out, exist_ok=True)
    np.savez(os.path.join(args.out, f"rank{rank}.npz"), **out)
    print(f"rank {rank}/{world}: done, {engine.global_steps} steps", flush=True)
    if isinstance(comm, dsc.Comm):
        views.clear()
        engine.close()
        comm.finalize()  # the host's explicit teardown (the engine's default world needs none)


if __name__ == "__main__":
    main()
