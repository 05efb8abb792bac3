"""The built-in GPT against the same GPT written in PyTorch (an independent
reference): same weights in, same loss, same gradients, and the same weights
after clipped AdamW steps (DeepSpeed's defaults: gradient_clipping 1.0; AdamW decays every parameter it is given). Skipped without torch."""
from __future__ import annotations

import math

import numpy as np
import pytest

import deepspeed_c as dsc

torch = pytest.importorskip("torch")
F = torch.nn.functional

V, T, L, H, C = 13, 12, 2, 2, 16
SPEC = {"type": "gpt", "vocab_size": V, "block_size": T, "n_layer": L, "n_head": H, "n_embd": C,
        "dropout": 0.0, "seed": 5}
LR, WD = 3e-3, 0.1
CONFIG = {"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 1,
          "optimizer": {"type": "AdamW", "params": {"lr": LR, "weight_decay": WD, "betas": [0.9, 0.95],
                                                    "eps": 1e-8}}}


def torch_gpt_loss(w: dict, ids: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """GPT-2 forward (pre-LN, tanh GELU, causal attention, tied lm_head), written out by hand."""
    B = ids.shape[0]
    x = w["wte.weight"][ids] + w["wpe.weight"][torch.arange(T)]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(L):
        p = f"h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"].T + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"].T + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    logits = x @ w["wte.weight"].T
    return F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), ignore_index=-100)


def batch(seed: int):
    r = np.random.default_rng(seed)
    ids = r.integers(0, V, size=(3, T)).astype(np.int64)
    tgt = r.integers(0, V, size=(3, T)).astype(np.int64)
    tgt[:, : T // 2] = -100  # loss on the second half only, as the main job does
    return ids, tgt


def test_gpt_matches_pytorch_forward_backward_and_adamw():
    if not hasattr(F, "gelu") or "approximate" not in F.gelu.__doc__:
        pytest.skip("this torch has no tanh GELU")
    with dsc.Engine(CONFIG, model=dsc.Model(SPEC)) as e:
        names = [i.name for i in e.named_parameters()]
        assert "wte.weight" in names and "lm_head.weight" not in names  # tied
        w = {n: torch.tensor(np.array(e.get_full_fp32_param(n)), dtype=torch.float64, requires_grad=True)
             for n in names}
        opt = torch.optim.AdamW([w[n] for n in names], lr=LR, betas=(0.9, 0.95), eps=1e-8, weight_decay=WD)
        for step in range(4):
            ids, tgt = batch(step)
            loss = e(ids, tgt)
            e.backward()
            opt.zero_grad()
            ref = torch_gpt_loss(w, torch.from_numpy(ids), torch.from_numpy(tgt))
            ref.backward()
            assert abs(float(loss) - ref.item()) < 1e-5 * max(1.0, ref.item()), (step, float(loss), ref.item())
            for n in names:
                g = np.array(e.get_full_grad(n), dtype=np.float64)
                gr = w[n].grad.numpy()
                scale = max(np.abs(gr).max(), 1e-6)
                np.testing.assert_allclose(g, gr, rtol=0, atol=2e-4 * scale, err_msg=f"step {step} grad {n}")
            info = e.step()
            # DeepSpeed's default gradient_clipping (1.0 since 0.19.3), fp32 path:
            # coef = clip / (norm + 1e-6), applied when < 1.
            norm = math.sqrt(sum(float((w[n].grad ** 2).sum()) for n in names))
            assert abs(info.grad_norm - norm) < 1e-5 * norm, (info.grad_norm, norm)
            coef = 1.0 / (norm + 1e-6)
            if coef < 1.0:
                for n in names:
                    w[n].grad.mul_(coef)
            opt.step()
            for n in names:
                p = np.array(e.get_full_fp32_param(n), dtype=np.float64)
                # Adam moves a weight by about lr per step whatever the gradient's size, so
                # fp32 rounding of a tiny gradient shows up as a fraction of lr; a semantic
                # difference (no decoupled weight decay: lr*wd*|p| = 3e-4, no bias correction,
                # other betas) is 100x above this bound.
                np.testing.assert_allclose(p, w[n].detach().numpy(), rtol=0, atol=1e-3 * LR * (step + 1),
                                           err_msg=f"step {step} weights {n}")
