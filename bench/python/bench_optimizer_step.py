#!/usr/bin/env python3
"""Optimizer step of a ~100M-parameter fp32 model: deepspeed_c against DeepSpeed and torch.

    python bench/python/bench_optimizer_step.py [--params 100e6] [--reps 5] [--rounds 3]
                                                 [--threads N] [--variants p,a,b,b0,c,c0,d]

Times the optimizer step only: the gradients are set before each timed call and
the same for every variant (seeded, one draw per process). AdamW, lr 1e-3,
betas (0.9, 0.999), eps 1e-8, weight decay 0.01, fp32 everywhere, no clipping
(gradient_clipping 0 for the engines; DeepSpeed's default would be 1.0).
  a   deepspeed_c.torch.initialize(...) engine.step()           (the PyTorch drop-in)
  b   deepspeed_c.Engine.step()                                  (the core Python API)
  b0  deepspeed_c.lowlevel.ds_step(handle)                       (the C call through SWIG: the floor)
  c   deepspeed.initialize(...) engine.step(), ZeRO 0, DS_ACCELERATOR=cpu, optimizer "Adam"
      with torch_adam false: DeepSpeed builds FusedAdam, whose CPU op (JIT-built with
      ninja) runs the same cpu_adam kernel as DeepSpeedCPUAdam
  c0  deepspeed.ops.adam.DeepSpeedCPUAdam(adamw_mode=True).step() on its own
  d   torch.optim.AdamW(fused=True).step()
  p   a, b and b0 paired in one process on one engine: each repetition runs the
      three calls back to back (rotating their order), so the machine's load
      hits all three alike; reported as a(p), b(p), b0(p) (its checksum differs from
      the others: it runs three times the steps)
Each (variant, round) is its own process (DeepSpeed's global state, and no
variant warms the caches of another); the variants are interleaved round by
round. OMP_NUM_THREADS and torch's thread count are the same for all.
Prints the CPU model and ISA, the median ms per variant, and the ratios
a/b, a/b0, a/c, a/c0, a/d. A figure for docs/PERFORMANCE.md; not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WIDTH = 4096
VARIANTS = {
    "a": "deepspeed_c.torch engine.step()",
    "b": "deepspeed_c.Engine.step()",
    "b0": "lowlevel.ds_step (SWIG)",
    "c": "DeepSpeed engine.step() (FusedAdam CPU op)",
    "c0": "DeepSpeedCPUAdam.step()",
    "d": "torch AdamW(fused=True).step()",
    "a(p)": "paired: deepspeed_c.torch engine.step()",
    "b(p)": "paired: deepspeed_c.Engine.step()",
    "b0(p)": "paired: lowlevel.ds_step (SWIG)",
}
ADAM = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}
# gradient_clipping 0: DeepSpeed's default is 1.0, which would add a norm and a
# scaling pass to the engines (a, b, b0, c) that the bare optimizers (c0, d) do
# not run; with it off every variant runs the same AdamW update on the same
# gradients (the checksums printed at the end agree).
CONFIG = {"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 0.0,
          "optimizer": {"type": "Adam", "params": dict(ADAM, torch_adam=False)}}


def cpu_description() -> str:
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "avx512f" if "avx512f" in flags else ("avx2" if "avx2" in flags else "baseline")
    return f"{model}, {os.cpu_count()} logical CPUs, ISA {isa}"


# ---------------------------------------------------------------- child side
def _model(torch, n_params: int):
    layers = max(1, round(n_params / (WIDTH * WIDTH + WIDTH)))
    torch.manual_seed(0)
    with torch.no_grad():
        model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(layers)])
    return model


def _grads(torch, model):
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(p.shape, generator=gen).mul_(1e-3) for p in model.parameters()]


def _time(step, set_grads, warmup: int, reps: int):
    times = []
    for i in range(warmup + reps):
        set_grads()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return times


def run_variant(variant: str, n_params: int, warmup: int, reps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    model = _model(torch, n_params)
    grads = _grads(torch, model)
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    info = {"variant": variant, "numel": sum(p.numel() for p in params), "torch": torch.__version__}

    if variant == "p":
        import deepspeed_c.torch as dst
        from deepspeed_c import lowlevel

        engine, _, _, _ = dst.initialize(model=model, model_parameters=params, config=CONFIG)
        core = engine.core
        handle = core._h()
        calls = [("a(p)", engine.step), ("b(p)", core.step), ("b0(p)", lambda: lowlevel.ds_step(handle))]
        paired = {k: [] for k, _ in calls}
        for i in range(warmup + reps):
            for j in range(len(calls)):
                key, step = calls[(i + j) % len(calls)]
                for n, g in zip(names, grads):
                    core.accumulate_grad(n, g, predivided=True)
                core.backward()
                t0 = time.perf_counter()
                step()
                t1 = time.perf_counter()
                if i >= warmup:
                    paired[key].append((t1 - t0) * 1e3)
        info["paired"] = paired
        info["times_ms"] = paired["a(p)"]
        final = torch.from_numpy(core.get_full_fp32_param(names[0]))
        info["checksum"] = float(final.double().sum())
        return info
    if variant in ("a", "b", "b0"):
        import deepspeed_c

        info["build"] = {k: v for k, v in deepspeed_c.build_info().items() if "simd" in k.lower() or "isa" in k.lower()}
        if variant == "a":
            import deepspeed_c.torch as dst

            engine, _, _, _ = dst.initialize(model=model, model_parameters=params, config=CONFIG)
            core = engine.core
            step = engine.step
        else:
            core = deepspeed_c.Engine(CONFIG)
            for n, p in zip(names, params):
                core.add_param(n, p.detach())
            core.init()
            if variant == "b":
                step = core.step
            else:
                from deepspeed_c import lowlevel

                handle = core._h()
                step = lambda: lowlevel.ds_step(handle)  # noqa: E731

        def set_grads():
            for n, g in zip(names, grads):
                core.accumulate_grad(n, g, predivided=True)
            core.backward()

        times = _time(step, set_grads, warmup, reps)
        final = torch.from_numpy(core.get_full_fp32_param(names[0]))
    elif variant in ("c", "c0"):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import deepspeed

        info["deepspeed"] = deepspeed.__version__
        if variant == "c":
            deepspeed.init_distributed(dist_backend="gloo")
            engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=params, config=CONFIG)
            info["optimizer"] = type(opt).__module__ + "." + type(opt).__name__
            step = engine.step
        else:
            from deepspeed.ops.adam import DeepSpeedCPUAdam

            opt = DeepSpeedCPUAdam(params, lr=ADAM["lr"], betas=tuple(ADAM["betas"]), eps=ADAM["eps"],
                                   weight_decay=ADAM["weight_decay"], adamw_mode=True)
            step = opt.step

        def set_grads():
            for p, g in zip(params, grads):
                p.grad = g

        times = _time(step, set_grads, warmup, reps)
        final = params[0].detach()
    elif variant == "d":
        opt = torch.optim.AdamW(params, lr=ADAM["lr"], betas=tuple(ADAM["betas"]), eps=ADAM["eps"],
                                weight_decay=ADAM["weight_decay"], fused=True)

        def set_grads():
            for p, g in zip(params, grads):
                p.grad = g

        times = _time(opt.step, set_grads, warmup, reps)
        final = params[0].detach()
    else:
        raise SystemExit(f"unknown variant {variant!r}")
    info["times_ms"] = times
    # Every variant ran the same steps on the same gradients: the first weights'
    # sum should agree to float32 rounding (a sanity check, printed by the parent).
    info["checksum"] = float(final.double().sum())
    return info


# ---------------------------------------------------------------- parent side
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=float, default=100e6)
    ap.add_argument("--reps", type=int, default=5, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)))
    ap.add_argument("--variants", default="p,a,b,b0,c,c0,d")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_variant(args.one, int(args.params), args.warmup, args.reps, args.threads)))
        return 0

    variants = [v for v in args.variants.split(",") if v]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), DS_ACCELERATOR="cpu",
               MASTER_ADDR="127.0.0.1", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_SIZE="1")
    print(f"CPU: {cpu_description()}; OMP_NUM_THREADS={args.threads}; {args.params:.3g} parameters; "
          f"{args.rounds} rounds x {args.reps} timed steps (after {args.warmup} warm-up) per variant")
    samples = {}
    info = {}
    for rnd in range(args.rounds):
        for i, v in enumerate(variants):
            env["MASTER_PORT"] = str(29650 + (rnd * len(variants) + i) % 200)
            cmd = [sys.executable, os.path.abspath(__file__), "--one", v, "--params", str(args.params),
                   "--reps", str(args.reps), "--warmup", str(args.warmup), "--threads", str(args.threads)]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                print(f"  round {rnd} {v}: FAILED (exit {proc.returncode}): {' | '.join(tail)}")
                continue
            rec = json.loads(lines[-1])
            for key, times in (rec.get("paired") or {v: rec["times_ms"]}).items():
                samples.setdefault(key, []).extend(times)
                info[key] = rec
                print(f"  round {rnd} {key:>5}: median {statistics.median(times):8.1f} ms "
                      f"({', '.join(f'{t:.1f}' for t in times)})", flush=True)
    med = {v: statistics.median(s) for v, s in samples.items() if s}
    print(f"\n{'variant':<6} {'what':<46} {'median ms':>10} {'n':>3}  checksum(param 0)")
    for v in [k for k in VARIANTS if k in samples or k in variants]:
        if v in med:
            extra = info[v].get("optimizer") or ""
            print(f"{v:<6} {VARIANTS[v]:<46} {med[v]:>10.1f} {len(samples[v]):>3}  "
                  f"{info[v]['checksum']:.6f} {extra}")
        elif v != "p":
            print(f"{v:<6} {VARIANTS[v]:<46} {'failed':>10}")
    if info:
        any_rec = next(iter(info.values()))
        print(f"numel {any_rec['numel']}, torch {any_rec['torch']}"
              + (f", deepspeed {info['c']['deepspeed']}" if "c" in info else ""))
    if "a" in med:
        ratios = [f"a/{v} = {med['a'] / med[v]:.3f}" for v in ("b", "b0", "c", "c0", "d") if v in med]
        print("ratios: " + ", ".join(ratios))
    if "a(p)" in med:
        print(f"paired ratios: a/b = {med['a(p)'] / med['b(p)']:.3f}, a/b0 = {med['a(p)'] / med['b0(p)']:.3f}")
    return 0 if all(v in med or v == "p" for v in variants) and ("p" not in variants or "a(p)" in med) else 1


if __name__ == "__main__":
    sys.exit(main())
