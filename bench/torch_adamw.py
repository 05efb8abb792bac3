#!/usr/bin/env python3
"""Time torch.optim.AdamW on this machine, for comparison with bench_adam.

Usage: /usr/bin/python3 bench/torch_adamw.py [n_params=100000000] [reps=11] [threads=2] [fused]
(a fourth argument "fused" times only fused=True)

Runs AdamW (lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01) with
torch's default implementation choice and with foreach=False/True where the
installed torch accepts the flag, and with fused=True (torch 2.x's fused CPU
kernel) where it exists, on
one flat tensor of n params and on 100 tensors of n/100 params; prints the
median ms/step after 2 warm-up steps. Exits 0 with a message if torch is not
importable.
"""
import statistics
import sys
import time


def main() -> int:
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print(f"torch_adamw: torch is not importable from {sys.executable} ({e}); nothing to time. "
              "(On Debian, python3-torch belongs to /usr/bin/python3.)")
        return 0

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000_000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, n={n}, reps={reps}")

    def bench(ntensors: int, foreach, fused=None):
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(n // ntensors)) for _ in range(ntensors)]
        for p in params:
            p.grad = torch.randn_like(p) * 1e-3
        kwargs = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        if foreach is not None:
            kwargs["foreach"] = foreach
        if fused is not None:
            kwargs["fused"] = fused
        try:
            opt = torch.optim.AdamW(params, **kwargs)
        except (TypeError, RuntimeError) as e:  # this torch lacks the flag (or fused on CPU)
            print(f"  (foreach={foreach} fused={fused} not supported by this torch: {e})")
            return
        times = []
        for r in range(reps + 2):
            t0 = time.perf_counter()
            opt.step()
            t1 = time.perf_counter()
            if r >= 2:
                times.append(t1 - t0)
        med = statistics.median(times)
        label = "fused=True" if fused else "default" if foreach is None else f"foreach={foreach}"
        tag = f"{n // 1_000_000}M" if n % 1_000_000 == 0 else str(n)
        print(f"torch_adamw_{tag}_{ntensors}tensors {label}: {med * 1e3:.1f} ms/step "
              f"(min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}; "
              f"{28 * n / med / 1e9:.2f} GB/s at 28 B/param)", flush=True)

    only_fused = len(sys.argv) > 4 and sys.argv[4] == "fused"
    for ntensors in (1, 100):
        if not only_fused:
            for foreach in (None, False, True):
                bench(ntensors, foreach)
        bench(ntensors, None, fused=True)  # torch >= 2.4 has a fused CPU AdamW
    return 0


if __name__ == "__main__":
    sys.exit(main())
