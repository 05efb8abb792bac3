"""The MLP of multirank_helpers as a torch module, trained through the PyTorch
drop-in deepspeed_c.torch.initialize in a DeepSpeed training loop, on however
many ranks started it (tools/ds-run -n N, or one plain process). Writes
OUT/rank<r>.npz as mlp_worker.py does (final fp32 master weights, per-step
lr, grad norm, local loss).

  torch_worker.py --out DIR --stage S [--gas G] [--steps N]
                  [--save DIR --save-at K] [--load DIR --start K]

--save/--save-at: engine.save_checkpoint after step K with a client_state
holding a tensor (pickled beside the manifest); --load/--start: load it first
(client_state checked), then train steps K..N.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import multirank_helpers as H  # noqa: E402

import deepspeed_c.torch as deepspeed  # noqa: E402  (the only line a DeepSpeed script changes)
from deepspeed_c.torch.utils import safe_get_full_fp32_param  # noqa: E402

# torch names of the MLP's parameters, in multirank_helpers' order.
TORCH_NAMES = {"0.weight": "fc1.weight", "0.bias": "fc1.bias", "2.weight": "fc2.weight", "2.bias": "fc2.bias"}


def build_model() -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(H.D_IN, H.HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(H.HIDDEN, H.D_OUT))
    init = H.initial_params()
    with torch.no_grad():
        for tname, p in model.named_parameters():
            p.copy_(torch.from_numpy(init[TORCH_NAMES[tname]]))
    return model


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--stage", type=int, required=True)
    p.add_argument("--gas", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--save", default=None)
    p.add_argument("--save-at", type=int, default=None)
    p.add_argument("--load", default=None)
    p.add_argument("--start", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)

    world = int(os.environ.get("WORLD_SIZE", "1"))  # set by ds-run; checked against the engine below
    model = build_model()
    engine, optimizer, _, lr_scheduler = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=H.config(args.stage, world, args.gas))
    rank = engine.core.rank
    assert engine.core.world_size == world, (engine.core.world_size, world)

    rec = {"lr": [], "grad_norm": [], "loss": []}
    out = {}
    if args.load:
        _, client = engine.load_checkpoint(args.load)
        assert client["saved_at"] == args.start and torch.equal(client["marker"], torch.arange(3.0)), client
        for tname, param in model.named_parameters():
            out["loaded." + TORCH_NAMES[tname]] = safe_get_full_fp32_param(param).numpy()
            # The module's parameter aliases the engine's (fp32) working weights: it shows the load.
            assert torch.equal(param.detach(), safe_get_full_fp32_param(param)), tname
    for step in range(args.start, args.steps):
        lr = engine.get_lr()[0]
        total = 0.0
        for micro in range(args.gas):
            x, t = H.local_batch(step, micro, rank, world, args.gas)
            y = engine(torch.from_numpy(x).float())
            loss = 0.5 * ((y - torch.from_numpy(t).float()) ** 2).sum() / x.shape[0]
            engine.backward(loss)
            engine.step()
            total += float(loss)
        assert engine.global_steps == step + 1
        rec["lr"].append(lr)
        rec["grad_norm"].append(engine.get_global_grad_norm())
        rec["loss"].append(total / args.gas)
        if args.save and args.save_at == step + 1:
            engine.save_checkpoint(args.save, client_state={"saved_at": step + 1, "marker": torch.arange(3.0)})
            for tname, param in model.named_parameters():
                out["saved." + TORCH_NAMES[tname]] = safe_get_full_fp32_param(param).numpy()
    out.update({k: np.asarray(v, dtype=np.float64) for k, v in rec.items()})
    for tname, param in model.named_parameters():
        out["param." + TORCH_NAMES[tname]] = safe_get_full_fp32_param(param).numpy()
    out["world"] = np.asarray([world, engine.global_steps, engine.skipped_steps])
    os.makedirs(args.out, exist_ok=True)
    np.savez(os.path.join(args.out, f"rank{rank}.npz"), **out)
    print(f"rank {rank}/{world}: done, {engine.global_steps} steps", flush=True)


if __name__ == "__main__":
    main()
