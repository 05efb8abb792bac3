"""Compare two per-step records (DeepSpeed vs deepspeed_c) of one config.

Metrics, each the maximum over the optimizer steps:
  param_rel   per parameter tensor: max|a - b| / max|b| (b = DeepSpeed's fp32 master)
  param_abs   max|a - b| over every element
  lr_abs      |lr_a - lr_b|
  norm_rel    |n_a - n_b| / n_b for the global grad norm, on steps both sides applied
  scale_equal the loss scale is identical after every step
  skip_equal  the skipped-step and global-step counters are identical after every step
"""
from __future__ import annotations

import math

import numpy as np

# Why these bounds (docs/PYTHON.md, "Differential against DeepSpeed", says the same):
# fp32  both sides run the forward/backward through the same torch ops on
#       bit-identical inputs; the optimizer kernels differ (DeepSpeed's FusedAdam
#       CPU op or torch.optim vs this library's SIMD kernels) in the order of
#       their float32 operations: 1-2 ulp on the first step with a non-zero lr,
#       and the next gradient is taken at those slightly different weights, so
#       the difference grows over 30 steps. DeepSpeed against itself (FusedAdam
#       vs torch_adam: true, same config) differs by ~1e-6 after 30 steps; 1e-5
#       leaves room for another CPU's kernels (AVX2 vs AVX-512) on both sides.
# bf16  the working weights are the bf16 rounding of the fp32 masters: a master
#       that differs by an fp32 ulp can round to the neighbouring bf16 value
#       (2^-8 = 0.4% of that weight), which changes the next gradients; the
#       gradients are also accumulated in bf16. 5e-3 is about one bf16 ulp.
# fp16  the same with an 11-bit significand: 1e-3 is about two fp16 ulp.
# lr    both compute the schedules in double; 1e-6 relative allows an lr kept
#       in float32 on one side. Loss scale and skipped steps must be equal.
TOLERANCES = {
    "fp32": {"param_rel": 1e-5, "lr_rel": 1e-6, "norm_rel": 1e-5},
    "bf16": {"param_rel": 5e-3, "lr_rel": 1e-6, "norm_rel": 5e-3},
    "fp16": {"param_rel": 1e-3, "lr_rel": 1e-6, "norm_rel": 1e-3},
}


def _norm(step: dict):
    value = step.get("grad_norm")
    if value is None:
        value = step.get("grad_norm_computed")
    return value


def compare(ours: dict, ref: dict, tol_class: str, ds_norm_new_scale: bool = False) -> dict:
    """ds_norm_new_scale: DeepSpeed divided the reported norm by the scale *after*
    its update (ZeRO-0 fp16 wrapper); at a growth step that is half the true
    norm, so it is multiplied back by new/old scale before comparing."""
    tol = TOLERANCES[tol_class]
    out = {"tol": tol_class, "steps": min(len(ours["steps"]), len(ref["steps"])),
           "param_rel": 0.0, "param_abs": 0.0, "lr_abs": 0.0, "lr_rel": 0.0, "norm_rel": 0.0,
           "norm_steps": 0, "norm_source": set(), "scale_equal": True, "skip_equal": True,
           "mom_equal": True, "first_bad_step": None, "problems": []}
    if len(ours["steps"]) != len(ref["steps"]):
        out["problems"].append(f"step count {len(ours['steps'])} vs DeepSpeed {len(ref['steps'])}")

    def bad(step: int, what: str) -> None:
        if out["first_bad_step"] is None:
            out["first_bad_step"] = step
        if len(out["problems"]) < 6:
            out["problems"].append(f"step {step}: {what}")

    prev_scale = None
    for a, b in zip(ours["steps"], ref["steps"]):
        s = b["step"]
        scale_before, prev_scale = prev_scale, b["loss_scale"]
        missing = sorted(set(b["params"]) ^ set(a["params"]))
        if missing:
            bad(s, f"parameter names differ: {missing[:4]}")
        step_rel = 0.0
        for name, ref_vals in b["params"].items():
            if name not in a["params"]:
                continue
            x = np.asarray(a["params"][name], dtype=np.float64)
            y = np.asarray(ref_vals, dtype=np.float64)
            if x.shape != y.shape:
                bad(s, f"{name}: {x.size} values vs {y.size}")
                continue
            diff = float(np.max(np.abs(x - y))) if x.size else 0.0
            if not math.isfinite(diff):
                diff = math.inf
            scale = float(np.max(np.abs(y))) if y.size else 0.0
            out["param_abs"] = max(out["param_abs"], diff)
            step_rel = max(step_rel, diff / scale if scale > 0 else diff)
        out["param_rel"] = max(out["param_rel"], step_rel)
        if step_rel > tol["param_rel"]:
            bad(s, f"param rel {step_rel:.3g}")
        lr_abs = abs(a["lr"] - b["lr"])
        lr_rel = lr_abs / abs(b["lr"]) if b["lr"] else lr_abs
        out["lr_abs"] = max(out["lr_abs"], lr_abs)
        out["lr_rel"] = max(out["lr_rel"], lr_rel)
        if lr_rel > tol["lr_rel"]:
            bad(s, f"lr {a['lr']!r} vs {b['lr']!r}")
        if a.get("momentum") is not None and b.get("momentum") is not None \
                and abs(a["momentum"] - b["momentum"]) > 1e-9:
            out["mom_equal"] = False
            bad(s, f"momentum {a['momentum']!r} vs {b['momentum']!r}")
        if a["loss_scale"] != b["loss_scale"]:
            out["scale_equal"] = False
            bad(s, f"loss scale {a['loss_scale']} vs {b['loss_scale']}")
        if a["skipped_steps"] != b["skipped_steps"]:
            out["skip_equal"] = False
            bad(s, f"skipped {a['skipped_steps']} vs {b['skipped_steps']}")
        if a["global_steps"] != b["global_steps"]:
            out["skip_equal"] = False
            bad(s, f"global_steps {a['global_steps']} vs {b['global_steps']}")
        applied = a["skipped_steps"] == b["skipped_steps"] and not _skipped_now(ref, s)
        na, nb = _norm(a), _norm(b)
        if ds_norm_new_scale and nb is not None and scale_before and b["loss_scale"] > scale_before:
            nb *= b["loss_scale"] / scale_before
        if applied and na is not None and nb is not None and nb > 0:
            out["norm_source"].add("reported" if b.get("grad_norm") is not None else "computed")
            rel = abs(na - nb) / nb
            out["norm_rel"] = max(out["norm_rel"], rel)
            out["norm_steps"] += 1
            if rel > tol["norm_rel"]:
                bad(s, f"grad norm {na!r} vs {nb!r}")
    out["norm_source"] = "+".join(sorted(out["norm_source"])) or "none"
    out["ok"] = not out["problems"]
    return out


def _skipped_now(ref: dict, step: int) -> bool:
    """True when DeepSpeed skipped optimizer step `step` (its counter went up)."""
    steps = ref["steps"]
    for i, rec in enumerate(steps):
        if rec["step"] == step:
            before = steps[i - 1]["skipped_steps"] if i else 0
            return rec["skipped_steps"] > before
    return False


def per_step(ours: dict, ref: dict) -> list:
    """One line per optimizer step: param rel difference, lr, grad norms, scale, skipped."""
    lines = []
    for a, b in zip(ours["steps"], ref["steps"]):
        rel = 0.0
        for name, ref_vals in b["params"].items():
            x = np.asarray(a["params"].get(name, []), dtype=np.float64)
            y = np.asarray(ref_vals, dtype=np.float64)
            if x.shape == y.shape and y.size:
                rel = max(rel, float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(y))), 1e-30))
        lines.append(f"step {b['step']:>3}: param rel {rel:9.2e}  lr {a['lr']:.6g}/{b['lr']:.6g}  "
                     f"norm {_norm(a)!s:.10}/{_norm(b)!s:.10}  scale {a['loss_scale']:g}/{b['loss_scale']:g}  "
                     f"skipped {a['skipped_steps']}/{b['skipped_steps']}")
    return lines


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: compare.py OURS.json DEEPSPEED.json   (per-step lines: deepspeed_c/DeepSpeed)")
    with open(sys.argv[1]) as fa, open(sys.argv[2]) as fb:
        print("\n".join(per_step(json.load(fa), json.load(fb))))
