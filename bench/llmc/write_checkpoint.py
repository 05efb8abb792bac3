#!/usr/bin/env python3
"""Write a random-initialised GPT in llm.c's checkpoint format, and random token files in its
data-loader format, so llm.c's CPU trainer (train_gpt2.c) trains the same GPT shape as ours.

    write_checkpoint.py OUT_DIR --vocab 8192 --block 128 --layers 6 --heads 6 --embd 384 [--seed 1]
                        [--tokens 200000]

Writes, in OUT_DIR (the trainer's working directory):
  gpt2_124M.bin                                    the model (the name train_gpt2.c opens)
  dev/data/tinyshakespeare/tiny_shakespeare_train.bin, ..._val.bin   uniform random tokens

Model file: 256 int32 header [20240326, 3, maxT, V, L, NH, C, Vp, 0...], then fp32 tensors in
llm.c's order: wte (Vp,C), wpe (maxT,C), ln1w, ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C),
attprojw (L,C,C), attprojb (L,C), ln2w, ln2b (L,C), fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C),
fcprojb (L,C), lnfw, lnfb (C). Init as GPT-2 (and ours): weights N(0, 0.02), the two residual
projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weight 1 / bias 0; wte rows past V zero.
Token file: 256 int32 header [20240520, 1, ntok], then ntok uint16 tokens.
"""
import argparse
import math
import os
import sys

import numpy as np

MODEL_MAGIC, MODEL_VERSION = 20240326, 3
DATA_MAGIC, DATA_VERSION = 20240520, 1
HEADER_INTS = 256


def header(values):
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[: len(values)] = values
    return h.tobytes()


def write_model(path, V, Vp, maxT, L, NH, C, seed, std=0.02):
    rng = np.random.default_rng(seed)
    proj_std = std / math.sqrt(2 * L)

    def normal(shape, s):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(s)

    wte = np.zeros((Vp, C), dtype=np.float32)
    wte[:V] = normal((V, C), std)
    tensors = [
        wte,                                   # wte (tied with the lm head)
        normal((maxT, C), std),                # wpe
        np.ones((L, C), np.float32),           # ln1w
        np.zeros((L, C), np.float32),          # ln1b
        normal((L, 3 * C, C), std),            # qkvw
        np.zeros((L, 3 * C), np.float32),      # qkvb
        normal((L, C, C), proj_std),           # attprojw
        np.zeros((L, C), np.float32),          # attprojb
        np.ones((L, C), np.float32),           # ln2w
        np.zeros((L, C), np.float32),          # ln2b
        normal((L, 4 * C, C), std),            # fcw
        np.zeros((L, 4 * C), np.float32),      # fcb
        normal((L, C, 4 * C), proj_std),       # fcprojw
        np.zeros((L, C), np.float32),          # fcprojb
        np.ones(C, np.float32),                # lnfw
        np.zeros(C, np.float32),               # lnfb
    ]
    with open(path, "wb") as f:
        f.write(header([MODEL_MAGIC, MODEL_VERSION, maxT, V, L, NH, C, Vp]))
        for t in tensors:
            f.write(t.astype("<f4", copy=False).tobytes())
    return sum(t.size for t in tensors)


def write_tokens(path, ntok, V, seed):
    rng = np.random.default_rng(seed)
    toks = rng.integers(0, V, size=ntok, dtype=np.uint16 if V <= 65536 else np.int64).astype("<u2")
    with open(path, "wb") as f:
        f.write(header([DATA_MAGIC, DATA_VERSION, ntok]))
        f.write(toks.tobytes())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--padded-vocab", type=int, default=0, help="default: vocab rounded up to 128")
    p.add_argument("--block", type=int, required=True, help="maxT (block_size)")
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--embd", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tokens", type=int, default=200000, help="tokens per data file")
    a = p.parse_args(argv)
    errors = []
    for name in ("vocab", "block", "layers", "heads", "embd", "tokens"):
        if getattr(a, name) <= 0:
            errors.append(f"--{name} must be positive, got {getattr(a, name)}")
    if a.vocab > 65536:
        errors.append(f"--vocab {a.vocab}: llm.c's token files are uint16, so at most 65536")
    if a.heads > 0 and a.embd % a.heads:
        errors.append(f"--heads {a.heads} does not divide --embd {a.embd}")
    Vp = a.padded_vocab or (a.vocab + 127) // 128 * 128
    if Vp < a.vocab:
        errors.append(f"--padded-vocab {Vp} is smaller than --vocab {a.vocab}")
    if errors:
        for e in errors:
            print("write_checkpoint.py: " + e, file=sys.stderr)
        return 2
    data_dir = os.path.join(a.out_dir, "dev", "data", "tinyshakespeare")
    os.makedirs(data_dir, exist_ok=True)
    n = write_model(os.path.join(a.out_dir, "gpt2_124M.bin"), a.vocab, Vp, a.block, a.layers, a.heads,
                    a.embd, a.seed)
    write_tokens(os.path.join(data_dir, "tiny_shakespeare_train.bin"), a.tokens, a.vocab, a.seed + 1)
    write_tokens(os.path.join(data_dir, "tiny_shakespeare_val.bin"), a.tokens, a.vocab, a.seed + 2)
    print(f"wrote {a.out_dir}: GPT L={a.layers} C={a.embd} NH={a.heads} V={a.vocab} (padded {Vp}) "
          f"maxT={a.block}, {n} parameters in llm.c's layout; {a.tokens} random tokens per data file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
