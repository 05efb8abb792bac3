"""Shared pieces of the deepspeed_c.torch tests: small models, data, configs,
the LR schedules in float64 from DeepSpeed's formulas, and an independent
pure-torch reference loop (torch.optim.AdamW + clip_grad_norm_)."""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch

IN, HIDDEN, OUT = 6, 16, 3


def mlp(seed: int = 0) -> torch.nn.Module:
    """A small fp32 MLP with a deterministic initialisation."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT))


class Fp32ComputeMLP(torch.nn.Module):
    """An MLP whose forward computes in fp32 from 16-bit weights (torch 1.13
    has no fp16 matmul on the CPU); gradients flow back to the 16-bit
    parameters in their own dtype, as a half model's would."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(torch.nn.functional.linear(x.float(), self.fc1.weight.float(), self.fc1.bias.float()))
        return torch.nn.functional.linear(h, self.fc2.weight.float(), self.fc2.bias.float())


def batches(n: int, batch: int = 8, seed: int = 1) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """``n`` regression batches (x, y) with a learnable target."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(IN, OUT, generator=g)
    out = []
    for _ in range(n):
        x = torch.randn(batch, IN, generator=g)
        out.append((x, torch.tanh(x @ w)))
    return out


def mse(model: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((model(x).float() - y) ** 2).mean()


def config(gas: int = 1, micro: int = 8, **extra: Any) -> Dict[str, Any]:
    """fp32 AdamW + weight decay + clipping + WarmupDecayLR, updated with ``extra``."""
    cfg: Dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": gas,
        "optimizer": {"type": "AdamW",
                      "params": {"lr": 0.01, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.05}},
        "gradient_clipping": 0.5,
        "scheduler": {"type": "WarmupDecayLR",
                      "params": {"warmup_min_lr": 0.001, "warmup_max_lr": 0.02,
                                 "warmup_num_steps": 6, "total_num_steps": 40, "warmup_type": "log"}},
    }
    cfg.update(extra)
    return cfg


def warmup_decay_lr(t: int, p: Dict[str, Any]) -> float:
    """DeepSpeed's WarmupDecayLR at iteration ``t`` (float64)."""
    lo, hi = float(p["warmup_min_lr"]), float(p["warmup_max_lr"])
    n = max(2, int(p["warmup_num_steps"]))
    total = int(p["total_num_steps"])
    if t < 0:
        return lo
    if t < n:
        gamma = math.log(t + 1) / math.log(n) if p.get("warmup_type", "log") == "log" else t / n
    else:
        gamma = max(0.0, (total - t) / max(1.0, total - n))
    return lo + (hi - lo) * gamma


def lr_sequence(cfg: Dict[str, Any], steps: int) -> List[float]:
    """The LR of optimizer steps 0..steps-1: step s runs at schedule value t = s - 1."""
    p = cfg["scheduler"]["params"]
    return [warmup_decay_lr(s - 1, p) for s in range(steps)]


def reference_run(model: torch.nn.Module, cfg: Dict[str, Any], data: Sequence[Tuple[torch.Tensor, torch.Tensor]],
                  steps: int) -> Tuple[List[Dict[str, torch.Tensor]], List[float], List[float]]:
    """Pure torch: AdamW, clip_grad_norm_, the float64 LR sequence, each step
    averaging ``gas`` micro-batches (loss / gas, DeepSpeed's order).
    Returns (params after each step, grad norms, lrs)."""
    model = copy.deepcopy(model)
    gas = cfg["gradient_accumulation_steps"]
    op = cfg["optimizer"]["params"]
    opt = torch.optim.AdamW(model.parameters(), lr=op["lr"], betas=tuple(op["betas"]), eps=op["eps"],
                            weight_decay=op["weight_decay"])
    lrs = lr_sequence(cfg, steps)
    snaps, norms = [], []
    it = iter(data)
    for s in range(steps):
        for _ in range(gas):
            x, y = next(it)
            (mse(model, x, y) / gas).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["gradient_clipping"])))
        for g in opt.param_groups:
            g["lr"] = lrs[s]
        opt.step()
        opt.zero_grad()
        snaps.append({n: p.detach().clone() for n, p in model.named_parameters()})
    return snaps, norms, lrs


def f32(x: float) -> float:
    """``x`` rounded to float32 (as a Python float)."""
    return float(torch.tensor(x, dtype=torch.float32))


def cpu_adam_reference_run(model: torch.nn.Module, cfg: Dict[str, Any],
                           data: Sequence[Tuple[torch.Tensor, torch.Tensor]], steps: int
                           ) -> List[Dict[str, torch.Tensor]]:
    """DeepSpeed CPU-Adam's AdamW written out in float64: fp32 hyperparameters
    and fp32 ``1 - beta`` constants (cpu_adam_impl.cpp), bias corrections from
    the step count, decoupled weight decay, clip ``coef = clip / (norm + 1e-6)``
    on the float64 norm, DeepSpeed's LR sequence. The forward/backward runs
    on an fp32 copy of the float64 master weights, as the engine's does.
    Returns the master weights after each step."""
    model = copy.deepcopy(model)
    gas = cfg["gradient_accumulation_steps"]
    op = cfg["optimizer"]["params"]
    b1, b2 = op["betas"]
    one_minus_b1, one_minus_b2 = f32(1.0 - f32(b1)), f32(1.0 - f32(b2))
    eps, wd = f32(op["eps"]), f32(op["weight_decay"])
    names = [n for n, _ in model.named_parameters()]
    master = {n: p.detach().double().clone() for n, p in model.named_parameters()}
    m = {n: torch.zeros_like(v) for n, v in master.items()}
    v2 = {n: torch.zeros_like(v) for n, v in master.items()}
    lrs = lr_sequence(cfg, steps)
    snaps = []
    it = iter(data)
    for s in range(steps):
        for _ in range(gas):
            x, y = next(it)
            (mse(model, x, y) / gas).backward()
        grads = {n: p.grad.double() for n, p in model.named_parameters()}
        norm = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
        coef = cfg["gradient_clipping"] / (norm + 1e-6)
        if coef < 1.0:
            grads = {n: g * coef for n, g in grads.items()}
        t = s + 1
        lr = f32(lrs[s])
        bc1 = f32(1.0 - b1 ** t)
        bc2_rsqrt = f32(1.0 / math.sqrt(1.0 - b2 ** t))
        for n in names:
            g = grads[n]
            m[n] = m[n] * f32(b1) + g * one_minus_b1
            v2[n] = v2[n] * f32(b2) + g * g * one_minus_b2
            update = m[n] / (v2[n].sqrt() * bc2_rsqrt + eps)
            master[n] = master[n] - lr * wd * master[n] - (lr / bc1) * update
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(master[n].float())
                p.grad = None
        snaps.append({n: w.clone() for n, w in master.items()})
    return snaps


def snapshot(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    return {n: p.detach().float().clone() for n, p in model.named_parameters()}


def max_rel_diff(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> float:
    """max over parameters of ||a - b|| / ||b|| (float64)."""
    worst = 0.0
    for n, ref in b.items():
        ref64 = ref.double()
        d = (a[n].double() - ref64).norm() / ref64.norm().clamp_min(1e-30)
        worst = max(worst, float(d))
    return worst


def train(engine: Any, data: Sequence[Tuple[torch.Tensor, torch.Tensor]], micro_steps: int,
          loss_fn: Callable[..., torch.Tensor] = mse) -> List[float]:
    """DeepSpeed's loop for ``micro_steps`` micro-batches; returns the losses."""
    losses = []
    for i in range(micro_steps):
        x, y = data[i]
        loss = loss_fn(engine, x, y)
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    return losses
