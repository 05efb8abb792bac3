"""deepspeed_c.Model + Engine(config, model=...): loss = engine(batch); engine.backward(); engine.step()."""
from __future__ import annotations

import numpy as np
import pytest

import deepspeed_c as dsc

SPEC = {"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16,
        "dropout": 0.1, "seed": 3}
CONFIG = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
          "optimizer": {"type": "adamw", "params": {"lr": 1e-2, "weight_decay": 0.0}}}


def batch():
    i = np.arange(16)
    return ((i * 7 + 3) % 16).reshape(2, 8).astype(np.int64), ((i * 5 + 1) % 16).reshape(2, 8).astype(np.int64)


def test_gpt_trains():
    ids, tgt = batch()
    with dsc.Engine(CONFIG, model=dsc.Model(SPEC)) as e:
        first = e(ids, tgt)
        e.backward()
        e.step()
        for _ in range(20):
            last = e(ids, tgt)
            e.backward()
            e.step()
    assert abs(first - np.log(16)) < 0.5
    assert last < 0.6 * first


def test_moe_experts_are_marked_expert():
    """ParamInfo.expert (DS_PARAM_EXPERT, DeepSpeed's is_moe_param) on exactly the experts."""
    spec = dict(SPEC, moe={"num_experts": 2})
    with dsc.Engine(CONFIG, model=dsc.Model(spec)) as e:
        infos = e.named_parameters()
        assert [p.name for p in infos if p.expert] == [
            p.name for p in infos if ".deepspeed_experts." in p.name]
        assert sum(p.expert for p in infos) == 8     # 2 experts x (c_fc, c_proj) x (weight, bias)


def test_eval_train_and_output():
    ids, _ = batch()
    with dsc.Engine(CONFIG, model=dsc.Model(SPEC)) as e:
        a, b = e(ids), e(ids)
        assert a.shape == (2, 8, 16) and a.dtype == np.float32
        assert not np.array_equal(a, b)            # dropout draws new masks
        e.eval()
        assert np.array_equal(e(ids), e(ids))      # dropout off
        with pytest.raises(dsc.InvalidStateError, match="ds_engine_eval"):
            e.backward()
        e.train()


def test_nonscalar_backward_equals_scalar():
    ids, tgt = batch()
    grads = []
    for scalar in (True, False):
        with dsc.Engine(CONFIG, model=dsc.Model(SPEC)) as e:
            if scalar:
                e(ids, tgt)
                e.backward()
            else:
                logits = e(ids).astype(np.float64)
                p = np.exp(logits - logits.max(-1, keepdims=True))
                p /= p.sum(-1, keepdims=True)
                p[np.arange(2)[:, None], np.arange(8)[None, :], tgt] -= 1.0
                e.backward((p / 16).astype(np.float32))
            grads.append({i.name: e.get_full_grad(i.name) for i in e.named_parameters()})
    for name, g in grads[0].items():
        np.testing.assert_allclose(grads[1][name], g, rtol=1e-3, atol=1e-6, err_msg=name)


def test_bad_spec_names_the_key():
    with pytest.raises(dsc.ConfigError, match="n_head: 5 does not divide n_embd = 64"):
        dsc.Model({"type": "gpt", "vocab_size": 8, "block_size": 4, "n_layer": 1, "n_head": 5, "n_embd": 64})
    m = dsc.Model(SPEC)
    assert m.num_params > 0
    with pytest.raises(dsc.InvalidStateError, match="no built-in model"):
        with dsc.Engine(CONFIG) as e:
            e(np.zeros((2, 8), np.int64))
