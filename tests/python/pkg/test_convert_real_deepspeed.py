"""A checkpoint saved by real DeepSpeed, converted, continues in deepspeed_c
as it continues in DeepSpeed.

Skipped unless `deepspeed` is importable (CI has no DeepSpeed; run it in a
venv with DeepSpeed and CPU torch, e.g. /work/torchvenv):
    DS_ACCELERATOR=cpu python -m pytest tests/python/pkg/test_convert_real_deepspeed.py
A tiny MLP trains 3 steps under deepspeed.initialize (one gloo rank), saves,
takes a 4th step; the checkpoint is converted, loaded into a deepspeed_c
Engine, and its 4th step (gradients from the same batch, computed by torch on
the engine's weights) is compared with DeepSpeed's.
"""
import os
import socket

import numpy as np
import pytest

os.environ.setdefault("DS_ACCELERATOR", "cpu")
torch = pytest.importorskip("torch")
deepspeed = pytest.importorskip("deepspeed")
dsc = pytest.importorskip("deepspeed_c")
from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state  # noqa: E402

from deepspeed_c.convert import convert_deepspeed_checkpoint  # noqa: E402

# Tolerances of the step after loading (relative to max |param|): the loaded
# state is compared bit for bit; the step itself runs DeepSpeed's FusedAdam
# kernel on one side and deepspeed_c's on the other (both fp32, with gradient
# clipping at DeepSpeed's default 1.0), which round differently in the last bits.
STEP_RTOL = 1e-6


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def _one_gloo_rank():
    if not torch.distributed.is_initialized():
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1",
                          LOCAL_RANK="0")
        deepspeed.init_distributed(dist_backend="gloo")


def _model(frozen=False):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    if frozen:
        m[0].bias.requires_grad_(False)  # a frozen parameter: not in DeepSpeed's optimizer groups
    return m


def _batches(n, dtype):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 4, generator=g).to(dtype), torch.randn(4, 2, generator=g).to(dtype)) for _ in range(n)]


def _loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


def _in_flat_group(eng, p, pick):
    """ZeRO 0 16-bit wrapper: fp32 master and optimizer state per flat group, the
    group's 16-bit parameters in order (safe_get_full_* return None there)."""
    for group, flat in zip(eng.optimizer.fp16_groups, eng.optimizer.fp32_groups_flat):
        offset = 0
        for q in group:
            if q is p:
                return pick(flat).detach().narrow(0, offset, p.numel()).view(p.shape).float().clone()
            offset += q.numel()
    raise AssertionError("parameter not in the wrapper's groups")


def _master(eng, p):
    if hasattr(eng.optimizer, "fp32_groups_flat"):
        return _in_flat_group(eng, p, lambda flat: flat)
    v = safe_get_full_fp32_param(p)  # None at ZeRO 0 fp32: the parameter is the master
    return (p.detach() if v is None else v).float().clone()


def _moment(eng, p, key):
    if hasattr(eng.optimizer, "fp32_groups_flat"):
        return _in_flat_group(eng, p, lambda flat: eng.optimizer.optimizer.state[flat][key])
    v = safe_get_full_optimizer_state(p, key)
    return (eng.optimizer.state[p][key] if v is None else v).float().clone()


def _config(stage, precision):
    cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "steps_per_print": 1000,
           "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.99], "eps": 1e-8,
                                                     "weight_decay": 0.1}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "warmup_max_lr": 0.01}},
           "zero_optimization": {"stage": stage}}
    if precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    return cfg


# DeepSpeed refuses fp16 on the CPU accelerator; the fp16 layouts are covered by test_convert_deepspeed.py.
@pytest.mark.parametrize("stage,precision,frozen", [
    (0, "fp32", False), (1, "fp32", False), (2, "fp32", False), (3, "fp32", False), (0, "bf16", False),
    (1, "bf16", False), (2, "bf16", False), (3, "bf16", False),
    (0, "fp32", True), (1, "bf16", True), (2, "fp32", True), (3, "bf16", True)])
def test_deepspeed_checkpoint_continues_alike(tmp_path, stage, precision, frozen):
    cfg = _config(stage, precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = _model(frozen)
    eng, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    batches = _batches(4, dtype)
    for x, y in batches[:3]:
        eng.backward(_loss(eng, x, y))
        eng.step()
    eng.save_checkpoint(str(tmp_path / "ds"), client_state={"epoch": 1})
    names = [n for n, _ in eng.module.named_parameters()]
    trained = {n: p for n, p in eng.module.named_parameters() if p.requires_grad}
    before = {n: _master(eng, p) for n, p in trained.items()}
    moments = {n: {k: _moment(eng, p, k) for k in ("exp_avg", "exp_avg_sq")} for n, p in trained.items()}
    with deepspeed.zero.GatheredParameters(list(eng.module.parameters())):  # ZeRO-3: gathered; else a no-op
        working = {n: p.detach().clone() for n, p in eng.module.named_parameters()}
    eng_skipped = eng.skipped_steps
    ds_scale = float(getattr(eng.optimizer, "cur_scale", 1.0))
    x, y = batches[3]
    eng.backward(_loss(eng, x, y))
    eng.step()
    after = {n: _master(eng, p) for n, p in trained.items()}
    ds_lr, ds_steps = eng.get_lr()[0], eng.global_steps

    convert_deepspeed_checkpoint(tmp_path / "ds", tmp_path / "out", progress=lambda s: None)

    with dsc.Engine(cfg) as e:
        for n in names:
            e.add_param(n, torch.zeros_like(working[n]), trainable=n in trained)
        e.init()
        _, client = e.load_checkpoint(str(tmp_path / "out"))
        assert client == {"epoch": 1}
        assert e.global_steps == 3 and e.skipped_steps == eng_skipped
        assert e.loss_scale == ds_scale
        for n in names:  # the converted state, bit for bit
            w = torch.from_dlpack(e.param(n)).reshape(working[n].shape)
            assert torch.equal(w, working[n]), n
            if n not in trained:
                continue
            np.testing.assert_array_equal(e.get_full_fp32_param(n), before[n].numpy(), err_msg=n)
            for k in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_array_equal(e.get_full_optimizer_state(n, k), moments[n][k].numpy(),
                                              err_msg=f"{n} {k}")
        # The 4th step: torch computes the gradients on the engine's weights.
        twin = _model(frozen).to(dtype)
        with torch.no_grad():
            for n, p in twin.named_parameters():
                p.copy_(torch.from_dlpack(e.param(n)).reshape(p.shape))
        (_loss(twin, x, y) * e.loss_multiplier).backward()
        for n, p in twin.named_parameters():
            if p.requires_grad:
                e.accumulate_grad(n, p.grad.contiguous(), predivided=True)
        e.backward()
        e.step()
        for n in trained:
            got = e.get_full_fp32_param(n)
            want = after[n].numpy()
            err = np.abs(got - want).max() / np.abs(want).max()
            print(f"stage {stage} {precision}{' frozen' if frozen else ''} {n}: max |dsc - ds| / max |ds| = {err:.3g}")
            assert err <= STEP_RTOL, (n, err)
        assert e.lr == pytest.approx(ds_lr, rel=1e-12)
        assert e.global_steps == ds_steps


# Two data-parallel ranks: each rank's optimizer file holds its partition (at
# ZeRO-3 per parameter, with every rank's model states file); the converter
# merges them. DeepSpeed runs in a child process group of 2 gloo ranks.
_TWO_RANKS = r'''
import os, sys, socket, torch
import torch.multiprocessing as mp


def worker(rank, port, out, cfg):
    os.environ.update(DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_RANK=str(rank))
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param
    deepspeed.init_distributed(dist_backend="gloo")
    dt = torch.bfloat16 if "bf16" in cfg else torch.float32
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    eng, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    g = torch.Generator().manual_seed(1)
    batches = [[(torch.randn(4, 5, generator=g).to(dt), torch.randn(4, 3, generator=g).to(dt)) for r in range(2)]
               for _ in range(4)]
    for b in batches[:3]:
        x, y = b[rank]
        eng.backward(((eng(x) - y) ** 2).mean())
        eng.step()
    eng.save_checkpoint(os.path.join(out, "ds"))
    before = {n: safe_get_full_fp32_param(p).float().clone() for n, p in eng.module.named_parameters()}
    x, y = batches[3][rank]
    eng.backward(((eng(x) - y) ** 2).mean())
    eng.step()
    after = {n: safe_get_full_fp32_param(p).float().clone() for n, p in eng.module.named_parameters()}
    if rank == 0:
        torch.save({"before": before, "after": after, "batch": batches[3], "lr": eng.get_lr()[0]},
                   os.path.join(out, "ref.pt"))


if __name__ == "__main__":
    import json
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port, sys.argv[1], json.loads(sys.argv[2])), nprocs=2)
'''


def _two_rank_model(dtype):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).to(dtype)


@pytest.mark.parametrize("stage,precision", [(1, "fp32"), (2, "bf16"), (3, "bf16")])
def test_two_rank_deepspeed_checkpoint_merges(tmp_path, stage, precision):
    import json
    import subprocess
    import sys

    cfg = _config(stage, precision)
    script = tmp_path / "two_ranks.py"
    script.write_text(_TWO_RANKS)
    r = subprocess.run([sys.executable, str(script), str(tmp_path), json.dumps(cfg)], capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, DS_ACCELERATOR="cpu"))
    assert r.returncode == 0, r.stderr[-3000:]
    files = sorted(os.listdir(tmp_path / "ds" / "global_step3"))
    assert [f for f in files if "optim_states" in f] == [
        f"{'bf16_' if precision == 'bf16' else ''}zero_pp_rank_{i}_mp_rank_00_optim_states.pt" for i in (0, 1)]
    if stage == 3:  # every rank saves its model states too
        assert [f for f in files if "model_states" in f] == [f"zero_pp_rank_{i}_mp_rank_00_model_states.pt"
                                                              for i in (0, 1)]
    ref = torch.load(tmp_path / "ref.pt", weights_only=False)

    convert_deepspeed_checkpoint(tmp_path / "ds", tmp_path / "dsc", progress=lambda s: None)

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    twin = _two_rank_model(dtype)
    with dsc.Engine(cfg) as e:
        for n, p in twin.named_parameters():
            e.add_param(n, torch.zeros_like(p))
        e.init()
        e.load_checkpoint(str(tmp_path / "dsc"))
        for n, want in ref["before"].items():  # merged from both ranks, bit for bit
            np.testing.assert_array_equal(e.get_full_fp32_param(n), want.numpy(), err_msg=n)
        with torch.no_grad():
            for n, p in twin.named_parameters():
                p.copy_(torch.from_dlpack(e.param(n)).reshape(p.shape))
        # DeepSpeed averages the two ranks' gradients; one deepspeed_c rank gets the average.
        grads = {}
        for x, y in ref["batch"]:
            twin.zero_grad()
            ((twin(x) - y) ** 2).mean().backward()
            for n, p in twin.named_parameters():
                grads[n] = grads.get(n, 0) + p.grad.float() / 2
        for n, g in grads.items():
            e.accumulate_grad(n, g.to(dtype).contiguous(), predivided=True)
        e.backward()
        e.step()
        for n, want in ref["after"].items():
            err = np.abs(e.get_full_fp32_param(n) - want.numpy()).max() / np.abs(want.numpy()).max()
            print(f"2 ranks stage {stage} {precision} {n}: max |dsc - ds| / max |ds| = {err:.3g}")
            assert err <= STEP_RTOL, (n, err)
        assert e.lr == pytest.approx(ref["lr"], rel=1e-12)
