"""deepspeed_c.torch against an independent pure-torch reference (fp32):
torch.optim.AdamW + clip_grad_norm_ + DeepSpeed's WarmupDecayLR computed in
float64, 30 optimizer steps, gradient_accumulation_steps 2 (initialize) and
1 (the Optimizer facade)."""
import copy

import pytest

torch = pytest.importorskip("torch")
import deepspeed_c  # noqa: E402
import deepspeed_c.torch as ds  # noqa: E402
import torch_helpers as th  # noqa: E402

STEPS = 30
TOL = 1e-6  # relative, per parameter tensor, per step


def test_initialize_matches_torch_adamw_clip_and_schedule():
    cfg = th.config(gas=2)
    model = th.mlp()
    data = th.batches(2 * STEPS)
    ref, ref_norms, lrs = th.reference_run(model, cfg, data, STEPS)
    engine, opt, _, sched = ds.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    worst = 0.0
    it = iter(data)
    for s in range(STEPS):
        assert engine.get_lr()[0] == pytest.approx(lrs[s], rel=1e-12)
        assert opt.param_groups[0]["lr"] == pytest.approx(lrs[s], rel=1e-12)
        for micro in range(2):
            assert engine.is_gradient_accumulation_boundary() == (micro == 1)
            x, y = next(it)
            engine.backward(th.mse(engine, x, y))
            engine.step()
        assert engine.global_steps == s + 1
        assert engine.get_global_grad_norm() == pytest.approx(ref_norms[s], rel=1e-5)
        worst = max(worst, th.max_rel_diff(th.snapshot(engine.module), ref[s]))
    print(f"initialize fp32 AdamW, gas 2, {STEPS} steps: max relative difference {worst:.3g}")
    assert worst <= TOL
    assert engine.global_samples == STEPS * 16
    assert engine.skipped_steps == 0
    assert sched.get_last_lr()[0] == pytest.approx(th.warmup_decay_lr(STEPS - 1, cfg["scheduler"]["params"]))
    assert sched.state_dict() == {"last_batch_iteration": STEPS - 1}


def test_optimizer_facade_matches_torch_adamw():
    cfg = th.config(gas=1)
    model = th.mlp()
    data = th.batches(STEPS)
    ref, _, lrs = th.reference_run(model, cfg, data, STEPS)
    opt = ds.Optimizer(model.named_parameters(), cfg)
    assert isinstance(opt, torch.optim.Optimizer)
    worst = 0.0
    for s, (x, y) in enumerate(data):
        assert opt.param_groups[0]["lr"] == pytest.approx(lrs[s], rel=1e-12)
        opt.zero_grad()
        th.mse(model, x, y).backward()
        opt.step()
        worst = max(worst, th.max_rel_diff(th.snapshot(model), ref[s]))
    print(f"Optimizer facade fp32 AdamW, {STEPS} steps: max relative difference {worst:.3g}")
    assert worst <= TOL


def test_facade_lr_write_reaches_the_engine_and_state_dict_round_trips():
    cfg = th.config(gas=1)
    del cfg["scheduler"]
    model = th.mlp()
    opt = ds.Optimizer(model.parameters(), cfg)
    opt.param_groups[0]["lr"] = 0.003
    assert opt.core.lr == pytest.approx(0.003)
    x, y = th.batches(1)[0]
    th.mse(model, x, y).backward()
    opt.step()
    assert opt.last_step_info.lr == pytest.approx(0.003)
    sd = opt.state_dict()
    assert set(sd["state"][0]) == {"exp_avg", "exp_avg_sq"}
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    other = ds.Optimizer(th.mlp(5).parameters(), cfg)
    other.load_state_dict(copy.deepcopy(sd))
    for i in range(4):
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(other.state_dict()["state"][i][key], sd["state"][i][key])
    assert other.param_groups[0]["lr"] == pytest.approx(0.003)


def test_facade_refuses_accumulation_groups_and_unscaled_fp16():
    model = th.mlp()
    with pytest.raises(deepspeed_c.UnsupportedError, match="gradient_accumulation_steps"):
        ds.Optimizer(model.parameters(), th.config(gas=2))
    groups = [{"params": [model[0].weight]}, {"params": [model[0].bias], "weight_decay": 0.0}]
    with pytest.raises(deepspeed_c.UnsupportedError, match="weight_decay"):
        ds.Optimizer(groups, th.config(gas=1))
    half = th.Fp32ComputeMLP()
    opt = ds.Optimizer(half.parameters(), th.config(gas=1, fp16={"enabled": True}))
    x, y = th.batches(1)[0]
    th.mse(half, x, y).backward()
    with pytest.raises(deepspeed_c.UnsupportedError, match="scale_loss"):
        opt.step()
    opt.zero_grad()
    opt.scale_loss(th.mse(half, x, y)).backward()
    opt.step()
    assert opt.last_step_info.stepped and not opt.last_step_info.skipped
