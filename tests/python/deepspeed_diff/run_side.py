"""Train one config on one side and write what each optimizer step produced as JSON.

    python run_side.py --side deepspeed|deepspeed_c --config NAME --out FILE.json

One process per side and config: DeepSpeed keeps global state (the process
group, accelerator, op builders), so the driver never runs both in one process.
The output has, per optimizer step, the fp32 master weights of every parameter,
the lr (and momentum), the global grad norm, the loss scale and the step
counters, or an "error" entry saying where the side failed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from configs import CONFIGS, OVERFLOW_FACTOR, side_config  # noqa: E402
from model_data import build_model, micro_batches  # noqa: E402


def _one_rank_env() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("LOCAL_SIZE", "1")):
        os.environ.setdefault(key, value)


def _ds_master_weights(engine, torch):
    """DeepSpeed's fp32 master copy of each parameter, by name.

    deepspeed.utils.safe_get_full_fp32_param covers ZeRO 1-3 and BF16_Optimizer;
    at ZeRO 0 fp32 the module parameters are the masters, and the ZeRO-0 fp16/bf16
    wrappers (FP16_Optimizer, FP16_UnfusedOptimizer) keep theirs in fp32 groups.
    """
    from deepspeed.utils import safe_get_full_fp32_param

    named = list(engine.module.named_parameters())
    out = {}
    for name, p in named:
        full = safe_get_full_fp32_param(p)
        if full is not None:
            out[name] = full
        elif p.dtype == torch.float32:
            out[name] = p
    if len(out) == len(named):
        return out
    opt = engine.optimizer
    by_id = {id(p): name for name, p in named}
    if hasattr(opt, "fp32_groups") and hasattr(opt, "fp16_groups"):  # FP16_UnfusedOptimizer
        for lp_group, hp_group in zip(opt.fp16_groups, opt.fp32_groups):
            for lp, hp in zip(lp_group, hp_group):
                out[by_id[id(lp)]] = hp
    elif hasattr(opt, "fp32_groups_flat") and hasattr(opt, "fp16_groups"):  # FP16_Optimizer
        for lp_group, flat in zip(opt.fp16_groups, opt.fp32_groups_flat):
            offset = 0
            for lp in lp_group:
                out[by_id[id(lp)]] = flat[offset:offset + lp.numel()].view_as(lp)
                offset += lp.numel()
    missing = [name for name, _ in named if name not in out]
    if missing:
        raise RuntimeError(f"no fp32 master found for {missing} in {type(opt).__name__}")
    return out


def _dsc_master_weights(engine, torch):
    from deepspeed_c.torch.utils import safe_get_full_fp32_param

    out = {}
    for name, p in engine.module.named_parameters():
        full = safe_get_full_fp32_param(p)
        if full is None:
            raise RuntimeError(f"deepspeed_c safe_get_full_fp32_param({name}) returned None")
        out[name] = full
    return out


def _loss_scale(engine) -> float:
    for holder in (engine.optimizer, engine):
        for attr in ("cur_scale", "loss_scale"):
            value = getattr(holder, attr, None)
            if isinstance(value, (int, float)) or hasattr(value, "item"):
                return float(value)
    return 1.0


def _momentum(engine):
    groups = getattr(engine.optimizer, "param_groups", None)
    if not groups:
        return None
    group = groups[0]
    if "betas" in group:
        return float(group["betas"][0])
    if "momentum" in group:
        return float(group["momentum"])
    return None


def _open_fp16_gate(config: dict):
    """Let DeepSpeed's CPU accelerator accept fp16 on a CPU without native fp16.

    DeepSpeed refuses fp16 when torch.ops.mkldnn._is_mkldnn_fp16_supported() is
    false (CPUs without AVX512-FP16/AMX-FP16, e.g. AMD Zen 4), although torch runs
    every fp16 op of this model on such a CPU. The gate is about speed, not
    numbers, so for the differential it is opened on the accelerator instance;
    the record says so. Returns True when it was opened.
    """
    if not config.get("fp16", {}).get("enabled"):
        return False
    from deepspeed.accelerator import get_accelerator

    acc = get_accelerator()
    if acc.is_fp16_supported():
        return False
    acc.is_fp16_supported = lambda: True
    return True


def _undo_zero0_dummy_step(engine, torch) -> None:
    """Undo FP16_Optimizer's construction-time step (see configs.py).

    Its fp32 masters were cloned from the 16-bit weights, which that step does
    not touch: copy them back, and restart the inner optimizer's step counters.
    """
    opt = engine.optimizer
    if type(opt).__name__ != "FP16_Optimizer":
        raise RuntimeError(f"ds_undo_zero0_dummy_step expects FP16_Optimizer, got {type(opt).__name__}")
    with torch.no_grad():
        for lp_flat, hp_flat in zip(opt.fp16_groups_flat, opt.fp32_groups_flat):
            hp_flat.copy_(lp_flat.float())
    inner = opt.optimizer
    for group in inner.param_groups:
        if "step" in group:
            group["step"] = 0
        for p in group["params"]:
            state = inner.state.get(p, {})
            if "step" in state:
                state["step"] = torch.zeros_like(state["step"]) if torch.is_tensor(state["step"]) else 0
            for key in ("exp_avg", "exp_avg_sq"):
                if key in state and bool(state[key].abs().max() > 0):
                    raise RuntimeError(f"{key} is not zero after the construction step")


def _initialize(side: str, model, config: dict):
    if side == "deepspeed":
        import deepspeed

        _initialize.fp16_gate_opened = _open_fp16_gate(config)
        deepspeed.init_distributed(dist_backend="gloo")
        engine, optimizer, _, scheduler = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=config)
    else:
        import deepspeed_c.torch as dst

        engine, optimizer, _, scheduler = dst.initialize(
            model=model, model_parameters=model.parameters(), config=config)
    return engine, optimizer, scheduler


def _describe(side: str, engine) -> dict:
    info = {"wrapper": type(engine.optimizer).__name__}
    basic = getattr(engine, "basic_optimizer", None)
    if basic is not None:
        info["optimizer"] = f"{type(basic).__module__}.{type(basic).__name__}"
    if side == "deepspeed":
        import deepspeed

        info["version"] = deepspeed.__version__
        if getattr(_initialize, "fp16_gate_opened", False):
            info["fp16_gate_opened"] = True
    else:
        import deepspeed_c

        info["version"] = deepspeed_c.__version__
    return info


def train(side: str, name: str) -> dict:
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    entry = CONFIGS[name]
    config = side_config(name, side)
    gas = int(config.get("gradient_accumulation_steps", 1))
    steps = entry["steps"]
    result = {"side": side, "config_name": name, "config": config, "torch": torch.__version__, "steps": []}
    phase = "initialize"
    try:
        model = build_model(torch)
        engine, _, _ = _initialize(side, model, config)
        if side == "deepspeed" and entry["ds_undo_zero0_dummy_step"]:
            _undo_zero0_dummy_step(engine, torch)
        result["engine"] = _describe(side, engine)
        masters = _ds_master_weights if side == "deepspeed" else _dsc_master_weights
        param_dtype = next(engine.module.parameters()).dtype
        batches = micro_batches(steps * gas)
        for micro, (x, y) in enumerate(batches):
            step_index = micro // gas
            phase = f"micro-step {micro} (optimizer step {step_index})"
            if step_index in entry["overflow_at"]:
                y = y * np.float32(OVERFLOW_FACTOR)
            xt = torch.from_numpy(x).to(param_dtype)
            yt = torch.from_numpy(y)
            out = engine(xt)
            loss = ((out.float() - yt) ** 2).mean()
            if side == "deepspeed" and entry["ds_fp16_zero0_scale_loss"]:
                engine.backward(loss * _loss_scale(engine))  # see configs.py
            else:
                engine.backward(loss)
            boundary = micro % gas == gas - 1
            computed_norm = None
            if boundary and side == "deepspeed" and param_dtype == torch.float32:
                # DeepSpeed's fp32 ZeRO-0 path (raw torch optimizer) reports no grad
                # norm; the gradients are still in p.grad here, so take it ourselves.
                grads = [p.grad.detach().double().reshape(-1) for p in engine.module.parameters()
                         if p.grad is not None]
                if grads:
                    computed_norm = float(torch.linalg.vector_norm(torch.cat(grads)))
            engine.step()
            if not boundary:
                continue
            reported = engine.get_global_grad_norm()
            if hasattr(reported, "item"):
                reported = reported.item()
            params = {k: v.detach().float().cpu().reshape(-1).tolist()
                      for k, v in masters(engine, torch).items()}
            result["steps"].append({
                "step": step_index,
                "loss": float(loss.detach().float()),
                "lr": float(engine.get_lr()[0]),
                "momentum": _momentum(engine),
                "grad_norm": None if reported is None else float(reported),
                "grad_norm_computed": computed_norm,
                "loss_scale": _loss_scale(engine),
                "global_steps": int(engine.global_steps),
                "skipped_steps": int(engine.skipped_steps),
                "params": params,
            })
    except Exception as exc:  # recorded for the table; the traceback goes to stderr
        traceback.print_exc()
        result["error"] = {"phase": phase, "type": type(exc).__name__, "message": str(exc).strip()[:600]}
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=["deepspeed", "deepspeed_c"], required=True)
    parser.add_argument("--config", choices=sorted(CONFIGS), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.side == "deepspeed":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        _one_rank_env()
    start = time.perf_counter()
    result = train(args.side, args.config)
    result["seconds"] = time.perf_counter() - start
    with open(args.out, "w") as fh:
        json.dump(result, fh)
    return 2 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
