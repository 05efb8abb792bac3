#!/usr/bin/env python3
"""Writes tests/data/moe/gating.txt from DeepSpeed's own gating functions.

The fixtures are DeepSpeed's output (an independent reference for
kernels/cpu/moe_gating.cpp and kernels/ref/ref_moe_gating.cpp): run with a
Python that has deepspeed and torch installed, e.g.
    ~/.cache/deepspeed_c/diffvenv/bin/python tests/tools/gen_moe_fixtures.py

Each case runs deepspeed.moe.sharded_moe.top1gating / top2gating with
sparse_routes=True (the index form: expert, slot, weight per route) on fixed
logits, then torch autograd for loss = sum(weight * G) + A * l_aux.
Random options (use_rts, RSample, the top-2 second-expert sampling) are made
deterministic by replacing DeepSpeed's uniform / Gumbel samplers with draws
from this project's counter-based stream, computed here from the Philox4x32-10
definition (Salmon et al., SC'11) as docs/DESIGN.md "Dropout RNG" and
kernels/nn_moe.h specify it.

Format, one case per block:
    C S E k capacity_factor min_capacity drop_tokens use_rts rsample second_sampling seed stream module_id offset
    L <S*E logits, row-major>
    G <S*k upstream gradients of the route weights, route = s*k + i>
    A <upstream gradient of l_aux>
    O <capacity> <l_aux>
    X <exp_counts, E values>
    R <S*k triples: expert slot weight> (expert and slot -1 for a dropped route)
    D <S*E d logits>
    E
"""
import logging
import math
import os
import random

logging.disable(logging.WARNING)
import torch  # noqa: E402
from deepspeed.moe import sharded_moe  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "moe")
M32 = 0xFFFFFFFF


def philox(ctr, key):
    c = list(ctr)
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c


def word(seed, stream, module_id, j):
    block = j // 4
    ctr = (block & M32, block >> 32, module_id, stream & M32)
    key = ((seed & M32) ^ (stream >> 32), seed >> 32)
    return philox(ctr, key)[j % 4]


def uniform64(rng, j):
    seed, stream, module_id, offset = rng
    return (word(seed, stream, module_id, offset + j) + 0.5) / 4294967296.0


def draws(rng, S, E, base, gumbel):
    vals = []
    for i in range(S * E):
        u = uniform64(rng, base + i)
        vals.append(-math.log(-math.log(u)) if gumbel else u)
    return torch.tensor(vals, dtype=torch.float32).reshape(S, E)


def run_case(out, S, E, k, cf, min_cap, drop, rts=False, rsample=False, second=False, seed=0, scale=2.0):
    rnd = random.Random(1000 * S + 10 * E + k + seed)
    logits_list = [round(rnd.gauss(0.0, scale), 4) for _ in range(S * E)]
    g_list = [round(rnd.uniform(-1.0, 1.0), 4) for _ in range(S * k)]
    a_up = round(rnd.uniform(0.5, 2.0), 4)
    rng = (0x1234ABCD5678 + seed, 7 + seed, 3 + seed, 11 * seed)
    dev = torch.device("cpu")
    sharded_moe.gumbel_map[dev] = lambda shape: draws(rng, S, E, 0, True)
    sharded_moe.exp_selection_uniform_map[dev] = lambda shape: draws(rng, S, E, S * E, False)

    leaf = torch.tensor(logits_list, dtype=torch.float32).reshape(S, E).requires_grad_(True)
    logits = leaf.clone()  # top-2 sampling adds noise to the logits in place
    if k == 1:
        l_aux, cap, _, idx, loc, gates, counts = sharded_moe.top1gating(
            logits, cf, min_cap, None, "RSample" if rsample else None, drop, rts, None, sparse_routes=True)
    else:
        l_aux, cap, _, idx, loc, gates, counts = sharded_moe.top2gating(
            logits, cf, min_cap, drop, None, second, sparse_routes=True)
    # [k, S] -> route order s*k + i
    idx = idx.t().reshape(-1).tolist()
    loc = loc.t().reshape(-1).tolist()
    w = gates.t().reshape(-1)
    g_up = torch.tensor(g_list, dtype=torch.float32)
    loss = (w * g_up).sum() + a_up * l_aux
    loss.backward()

    out.write(f"C {S} {E} {k} {cf!r} {min_cap} {int(drop)} {int(rts)} {int(rsample)} {int(second)} "
              f"{rng[0]} {rng[1]} {rng[2]} {rng[3]}\n")
    out.write("L " + " ".join(repr(v) for v in logits_list) + "\n")
    out.write("G " + " ".join(repr(v) for v in g_list) + "\n")
    out.write(f"A {a_up!r}\n")
    out.write(f"O {int(cap)} {l_aux.item()!r}\n")
    out.write("X " + " ".join(str(int(c)) for c in counts.tolist()) + "\n")
    routes = []
    for r in range(S * k):
        kept = idx[r] >= 0
        routes.append(f"{idx[r] if kept else -1} {loc[r] if kept else -1} {w[r].item()!r}")
    out.write("R " + " ".join(routes) + "\n")
    out.write("D " + " ".join(repr(v) for v in leaf.grad.reshape(-1).tolist()) + "\n")
    out.write("E\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "gating.txt"), "w") as out:
        out.write("# DeepSpeed 0.19.8 top1gating/top2gating output, written by tests/tools/gen_moe_fixtures.py; "
                  "do not edit\n")
        # Top-1 without RTS: capacities at least the largest expert count, so
        # torch.topk's unspecified tie order among equal scores never matters.
        run_case(out, 8, 4, 1, 4.0, 0, True)
        run_case(out, 16, 4, 1, 1.0, 4, False)
        run_case(out, 12, 3, 1, 1.0, 12, True)
        # Top-1 with RTS (priorities from the stream): capacity drops.
        run_case(out, 16, 4, 1, 1.0, 2, True, rts=True, seed=1)
        run_case(out, 24, 4, 1, 0.5, 1, True, rts=True, seed=2, scale=1.0)
        run_case(out, 10, 3, 1, 1.2, 3, True, rts=True, seed=3)
        run_case(out, 20, 5, 1, 0.75, 0, True, rts=True, rsample=True, seed=4)
        run_case(out, 16, 4, 1, 1.0, 4, False, rts=True, rsample=True, seed=5)
        # Top-2: position-based dropping, renormalised weights.
        run_case(out, 8, 4, 2, 1.0, 4, True)
        run_case(out, 16, 4, 2, 0.5, 1, True, seed=6)
        run_case(out, 24, 6, 2, 0.3, 0, True, seed=7, scale=3.0)
        run_case(out, 12, 3, 2, 1.0, 4, False, seed=8)
        run_case(out, 10, 2, 2, 0.6, 1, True, seed=9)
        run_case(out, 16, 4, 2, 0.5, 2, True, second=True, seed=10)
        run_case(out, 9, 5, 2, 1.0, 0, False, second=True, seed=11)


if __name__ == "__main__":
    main()
