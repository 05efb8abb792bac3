#!/usr/bin/env python3
"""The benchmark GPT in PyTorch eager: the GPT-2 architecture of our built-in model (pre-LayerNorm
blocks, fused qkv projection, causal attention, tanh GELU, biases on, lm_head tied to wte), the
same init (N(0, 0.02); the two residual projections N(0, 0.02/sqrt(2L)); biases 0), AdamW.

Times forward + backward + optimizer step on random tokens and prints, per precision, one line

    RESULT torch-<fp32|bf16> tokens_per_s=<median> step_ms=<median> steps=<n> loss=<last> maxrss_mb=<peak>

Precisions alternate step by step ("interleaved") so a change in machine load hits both alike.
bf16 = torch.autocast(<device>, dtype=torch.bfloat16) around forward + loss, fp32 master weights.

    gpt_torch.py --layers 6 --heads 6 --embd 384 --vocab 8192 --batch 8 --seq 128 --threads 2

--device cuda: the models, the optimizer state and the batches on cuda:0 (the batches drawn on
the host and copied inside the timed step, as bench_gpt --device cuda has ds_forward copy
them); torch.cuda.synchronize() before each clock read, so a step's time includes its GPU
work. fp32 matmuls run in full fp32 (torch's default; TF32 off, as our cuBLAS products).
Without torch, or without a CUDA device for --device cuda, prints "SKIPPED: ..." and exits 0.
"""
import argparse
import math
import resource
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # a GPU machine without network may have no torch: a dry run, not a failure
    print(f"SKIPPED: torch not available ({e})")
    sys.exit(0)


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.nh = NH
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def attention(self, x):
        B, T, C = x.shape
        hs = C // self.nh
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, hs).transpose(1, 2) for t in (q, k, v))  # (B, NH, T, hs)
        sdpa = getattr(F, "scaled_dot_product_attention", None)  # torch >= 2.0
        if sdpa is not None:
            y = sdpa(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, maxT, L, NH, C, std=0.02):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln_" in name or name.startswith("ln_f"):
                nn.init.ones_(p)
            elif name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.h:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied lm_head, no bias
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def main(argv=None):
    p = argparse.ArgumentParser(description="GPT training tokens/s in PyTorch eager")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--embd", type=int, default=384)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--block", type=int, default=0, help="block_size (default: --seq)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5, help="timed steps per precision")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per precision")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = p.parse_args(argv)
    block = a.block or a.seq
    precs = [s for s in a.precisions.split(",") if s]
    bad = [s for s in precs if s not in ("fp32", "bf16")]
    if bad or not precs:
        print(f"gpt_torch.py: --precisions: unknown {bad or 'empty list'} (fp32, bf16)", file=sys.stderr)
        return 2
    if a.embd % a.heads:
        print(f"gpt_torch.py: --heads {a.heads} does not divide --embd {a.embd}", file=sys.stderr)
        return 2
    if a.seq > block:
        print(f"gpt_torch.py: --seq {a.seq} exceeds --block {block}", file=sys.stderr)
        return 2

    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"SKIPPED: no CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False)")
        return 0
    dev = torch.device(a.device)
    cuda = a.device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products in fp32, as ours
        torch.backends.cudnn.allow_tf32 = False

    def sync():
        if cuda:
            torch.cuda.synchronize()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    # One model and optimizer per precision, identical initial weights.
    runs = {}
    for prec in precs:
        torch.manual_seed(a.seed)
        model = GPT(a.vocab, block, a.layers, a.heads, a.embd).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        runs[prec] = {"model": model, "opt": opt, "times": [], "loss": float("nan")}
    nparams = sum(p.numel() for p in runs[precs[0]]["model"].parameters())
    gen = torch.Generator().manual_seed(a.seed + 7)

    def step(prec):
        r = runs[prec]
        idx = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        tgt = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        sync()
        t0 = time.perf_counter()
        idx, tgt = idx.to(dev), tgt.to(dev)
        if prec == "bf16":
            with torch.autocast(a.device, dtype=torch.bfloat16):
                loss = r["model"](idx, tgt)
        else:
            loss = r["model"](idx, tgt)
        r["opt"].zero_grad(set_to_none=True)
        loss.backward()
        r["opt"].step()
        sync()
        dt = time.perf_counter() - t0
        r["loss"] = loss.item()
        return dt

    for i in range(a.warmup + a.steps):
        for prec in precs:
            dt = step(prec)
            if i >= a.warmup:
                runs[prec]["times"].append(dt)

    tokens = a.batch * a.seq
    maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    where = f"cuda:0 {torch.cuda.get_device_name(0)}" if cuda else "cpu"
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, params={nparams}, "
          f"GPT L={a.layers} C={a.embd} NH={a.heads} V={a.vocab} B={a.batch} T={a.seq}, device {where}")
    for prec in precs:
        med = statistics.median(runs[prec]["times"])
        print(f"RESULT torch-{prec} tokens_per_s={tokens / med:.1f} step_ms={med * 1e3:.1f} "
              f"steps={len(runs[prec]['times'])} loss={runs[prec]['loss']:.4f} maxrss_mb={maxrss_mb:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
