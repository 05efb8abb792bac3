"""The configurations of the DeepSpeed differential.

Each entry is one DeepSpeed config plus the knobs of the run around it:
  steps          optimizer steps (boundaries) to train
  overflow_at    optimizer-step indices (0-based) whose micro-batches have their
                 targets scaled by OVERFLOW_FACTOR: the loss gradient at the fp16
                 output is then above 65504 whatever the loss scale, so the step
                 overflows on both sides (scaling the inputs would not: the
                 LayerNorm after the first Linear removes their scale)
  ds_overrides   keys merged into the config for the DeepSpeed side only, where
                 DeepSpeed can run an optimizer on CPU only in another mode (say why
                 in `note`); the update rule must be the same
  ds_fp16_zero0_scale_loss
                 multiply the loss by DeepSpeed's loss scale before engine.backward
                 on the DeepSpeed side: DeepSpeed 0.19.8 at ZeRO 0 with fp16 never
                 scales the loss in engine.backward, while FP16_Optimizer.step still
                 divides by the scale (gradients come out 1/scale of the true ones;
                 DeepSpeed PR #8393, open); this applies that PR's fix from outside
  ds_undo_zero0_dummy_step
                 on the DeepSpeed side, undo what DeepSpeed's ZeRO-0 fp16/bf16 wrapper
                 (FP16_Optimizer) does at construction: one optimizer step on all-zero
                 gradients, which applies one decoupled weight decay with the
                 configured lr and starts Adam's step count at 1. deepspeed_c does
                 not copy it (docs/DESIGN.md, "Training step"); undoing it shows that
                 everything else agrees
  ds_norm_new_scale
                 DeepSpeed's ZeRO-0 fp16 wrapper reports the grad norm divided by
                 the loss scale after its update, deepspeed_c by the scale the
                 gradients were made with (ZeRO-1/2's choice, docs/DESIGN.md): the
                 comparison takes DeepSpeed's value back to the old scale
  known_diff     why deepspeed_c differs from DeepSpeed here by design; the row
                 then reads DIFFERS-BY-DESIGN instead of FAIL (and PASS if it agrees)
  tol            the tolerance class (see compare.TOLERANCES)
  note           a line printed in the table and the docs
"""
from __future__ import annotations

import copy

STEPS = 30
OVERFLOW_FACTOR = 1.0e6


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


ADAMW = {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}}
ADAM_L2 = {"type": "Adam", "params": {"lr": 1e-2, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.01,
                                      "adam_w_mode": False}}
ADAM_TORCH = {"type": "Adam", "params": {"lr": 5e-3, "betas": [0.85, 0.995], "eps": 1e-7, "weight_decay": 0.02,
                                         "torch_adam": True}}
LAMB = {"type": "Lamb", "params": {"lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-6, "weight_decay": 0.01,
                                   "max_coeff": 10.0, "min_coeff": 0.01}}
SGD = {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4}}
LION = {"type": "Lion", "params": {"lr": 1e-3, "betas": [0.9, 0.99], "weight_decay": 0.01}}

WARMUP_LR = {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 1e-2,
                                            "warmup_num_steps": 10}}  # warmup_type "log" (default)
WARMUP_LR_LINEAR = {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-4, "warmup_max_lr": 1e-2,
                                                   "warmup_num_steps": 8, "warmup_type": "linear"}}
WARMUP_DECAY = {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 1e-2,
                                                    "warmup_num_steps": 5, "total_num_steps": 30,
                                                    "warmup_type": "linear"}}
WARMUP_COSINE = {"type": "WarmupCosineLR", "params": {"total_num_steps": 30, "warmup_num_steps": 5,
                                                      "warmup_min_ratio": 0.1, "cos_min_ratio": 0.01}}
ONE_CYCLE = {"type": "OneCycle", "params": {"cycle_min_lr": 0.01, "cycle_max_lr": 0.1,
                                            "cycle_first_step_size": 10, "cycle_momentum": True,
                                            "cycle_min_mom": 0.8, "cycle_max_mom": 0.9,
                                            "decay_lr_rate": 0.1, "decay_step_size": 5}}
LR_RANGE = {"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 5,
                                              "lr_range_test_step_rate": 1.0,
                                              "lr_range_test_staircase": False}}

BASE = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}
# A moderate scale and window: the scale doubles every 8 clean steps from 4096,
# so only the injected steps overflow (an overflow that happens naturally depends
# on values within an ulp of 65504 and could differ between two correct sides).
FP16 = {"fp16": {"enabled": True, "initial_scale_power": 12, "loss_scale_window": 8, "hysteresis": 2,
                 "min_loss_scale": 1}}
BF16 = {"bf16": {"enabled": True}}


def _cfg(**extra) -> dict:
    return _merge(BASE, extra)


def _zero(stage: int) -> dict:
    return {"zero_optimization": {"stage": stage}}


ZERO0_DUMMY_STEP_DIFF = ("DeepSpeed's ZeRO-0 fp16/bf16 wrapper runs one optimizer step on zero gradients "
                         "at construction (one weight decay with the configured lr, Adam step count starts "
                         "at 1); deepspeed_c does not (docs/DESIGN.md, Training step)")
ZERO0_FP16_DIFF = (ZERO0_DUMMY_STEP_DIFF + "; and at ZeRO 0 DeepSpeed's fp16 scaler has no hysteresis, "
                   "deepspeed_c uses the ZeRO-1/2 DynamicLossScaler (hysteresis) at every stage")

# DeepSpeed runs Lion on CPU only as DeepSpeedCPULion, which it builds only under
# ZeRO-Offload (offload_optimizer.device "cpu", stage 1/2); FusedLion has no CPU op.
LION_OFFLOAD = {"zero_optimization": {"offload_optimizer": {"device": "cpu"}}}

CONFIGS = {
    # fp32, ZeRO 0: each optimizer, each schedule at least once
    "fp32_adamw_warmuplr_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_LR, gradient_clipping=1.0)),
    "fp32_adam_l2_warmupdecay": dict(config=_cfg(optimizer=ADAM_L2, scheduler=WARMUP_DECAY)),
    "fp32_adam_torch_warmupcosine_clip": dict(config=_cfg(optimizer=ADAM_TORCH, scheduler=WARMUP_COSINE,
                                                          gradient_clipping=0.5)),
    "fp32_lamb_warmupcosine": dict(config=_cfg(optimizer=LAMB, scheduler=WARMUP_COSINE)),
    "fp32_sgd_onecycle_clip": dict(config=_cfg(optimizer=SGD, scheduler=ONE_CYCLE, gradient_clipping=1.0)),
    "fp32_lion_lrrange": dict(config=_cfg(optimizer=LION, scheduler=LR_RANGE)),
    "fp32_adamw_gas2_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_LR_LINEAR, gradient_clipping=0.5,
                                             gradient_accumulation_steps=2)),
    # fp32, ZeRO 1/2
    "fp32_zero1_adamw_gas2_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_DECAY, gradient_clipping=1.0,
                                                   gradient_accumulation_steps=2, **_zero(1))),
    "fp32_zero2_adamw_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_COSINE, gradient_clipping=1.0,
                                              **_zero(2))),
    "fp32_zero2_sgd_onecycle": dict(config=_cfg(optimizer=SGD, scheduler=ONE_CYCLE, zero_allow_untested_optimizer=True,
                                                **_zero(2))),
    "fp32_zero2_lion_lrrange_ds_offload": dict(
        config=_cfg(optimizer=LION, scheduler=LR_RANGE, **_zero(2)), ds_overrides=LION_OFFLOAD,
        note="DeepSpeed side with offload_optimizer cpu (DeepSpeedCPULion)"),
    "fp32_zero1_lamb": dict(config=_cfg(optimizer=LAMB, scheduler=WARMUP_LR, zero_allow_untested_optimizer=True,
                                        **_zero(1))),
    # bf16, ZeRO 0/1/2
    "bf16_adamw_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_LR, gradient_clipping=1.0, **BF16),
                            tol="bf16", known_diff=ZERO0_DUMMY_STEP_DIFF),
    "bf16_adamw_clip_aligned": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_LR, gradient_clipping=1.0, **BF16),
                                    tol="bf16", ds_undo_zero0_dummy_step=True,
                                    note="DeepSpeed's construction step undone"),
    "bf16_zero1_adamw_gas2_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_DECAY, gradient_clipping=1.0,
                                                   gradient_accumulation_steps=2, **BF16, **_zero(1)), tol="bf16"),
    "bf16_zero2_adamw_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_COSINE, gradient_clipping=1.0,
                                              **BF16, **_zero(2)), tol="bf16"),
    # fp16 with injected overflows (steps 3, 10, 11: the first is absorbed by hysteresis
    # 2, the pair halves the scale), ZeRO 0/1/2
    "fp16_adamw_overflow_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_LR, gradient_clipping=1.0, **FP16),
                                     overflow_at=[3, 10, 11], tol="fp16", ds_fp16_zero0_scale_loss=True,
                                     known_diff=ZERO0_FP16_DIFF,
                                     note="DeepSpeed side with PR #8393's fix (loss scaled before engine.backward)"),
    "fp16_adamw_overflow_clip_aligned": dict(
        config=_cfg(optimizer=ADAMW, scheduler=WARMUP_LR, gradient_clipping=1.0,
                    fp16=dict(FP16["fp16"], hysteresis=1)),
        overflow_at=[3, 10, 11], tol="fp16", ds_fp16_zero0_scale_loss=True, ds_undo_zero0_dummy_step=True,
        ds_norm_new_scale=True,
        note="hysteresis 1 (both scaler rules agree) and DeepSpeed's construction step undone; "
             "DeepSpeed side with PR #8393's fix"),
    "fp16_zero1_adamw_overflow_gas2": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_DECAY,
                                                       gradient_accumulation_steps=2, **FP16, **_zero(1)),
                                           overflow_at=[3, 10, 11], tol="fp16"),
    "fp16_zero2_adamw_overflow_clip": dict(config=_cfg(optimizer=ADAMW, scheduler=WARMUP_COSINE, gradient_clipping=1.0,
                                                       **FP16, **_zero(2)), overflow_at=[3, 10, 11], tol="fp16"),
}

for _name, _entry in CONFIGS.items():
    _entry.setdefault("steps", STEPS)
    _entry.setdefault("overflow_at", [])
    _entry.setdefault("ds_overrides", {})
    _entry.setdefault("tol", "fp32")
    _entry.setdefault("note", "")
    _entry.setdefault("ds_fp16_zero0_scale_loss", False)
    _entry.setdefault("ds_undo_zero0_dummy_step", False)
    _entry.setdefault("known_diff", "")
    _entry.setdefault("ds_norm_new_scale", False)


def side_config(name: str, side: str) -> dict:
    """The config dict the given side ("deepspeed" or "deepspeed_c") trains with."""
    entry = CONFIGS[name]
    if side == "deepspeed":
        return _merge(entry["config"], entry["ds_overrides"])
    return copy.deepcopy(entry["config"])
