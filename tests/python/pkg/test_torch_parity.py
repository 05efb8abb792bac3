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

# th.config() uses betas (0.9, 0.99). The engine follows DeepSpeed CPU-Adam and
# forms 1 - beta in fp32; torch.optim.AdamW forms it in double. For beta2 = 0.99
# the two differ by 9.5e-7 relative, for DeepSpeed's default 0.999 by 1.3e-5, which
# drifts 30 steps ~4e-6 apart from torch. The default betas are checked against a
# float64 formula with CPU-Adam's constants below (test_default_betas_...).


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_initialize_matches_torch_adamw_clip_and_schedule(stage):
    cfg = th.config(gas=2, zero_optimization={"stage": stage})
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
    print(f"initialize fp32 AdamW ZeRO {stage}, gas 2, {STEPS} steps: max relative difference {worst:.3g}")
    assert worst <= TOL
    assert engine.global_samples == STEPS * 16
    assert engine.skipped_steps == 0
    assert sched.get_last_lr()[0] == pytest.approx(th.warmup_decay_lr(STEPS - 1, cfg["scheduler"]["params"]))
    assert sched.state_dict() == {"last_batch_iteration": STEPS - 1}


def test_default_betas_match_the_cpu_adam_formula_in_float64():
    cfg = th.config(gas=2)
    cfg["optimizer"]["params"]["betas"] = [0.9, 0.999]
    model = th.mlp()
    data = th.batches(2 * STEPS)
    ref = th.cpu_adam_reference_run(model, cfg, data, STEPS)
    engine, *_ = ds.initialize(model=model, config=cfg)
    worst = 0.0
    it = iter(data)
    for s in range(STEPS):
        for _ in range(2):
            x, y = next(it)
            engine.backward(th.mse(engine, x, y))
            engine.step()
        worst = max(worst, th.max_rel_diff(th.snapshot(engine.module), ref[s]))
    print(f"initialize AdamW betas (0.9, 0.999) vs float64 CPU-Adam formula: max relative difference {worst:.3g}")
    assert worst <= TOL


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


def test_facade_bf16_learns_and_a_torch_lr_scheduler_drives_the_engine():
    cfg = th.config(gas=1, bf16={"enabled": True})
    del cfg["scheduler"]
    model = th.mlp()
    opt = ds.Optimizer(model.parameters(), cfg)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 - 0.01 * step)
    data = th.batches(40)
    losses = []
    for s, (x, y) in enumerate(data):
        opt.zero_grad()
        loss = th.mse(model, x.bfloat16(), y)
        loss.backward()
        opt.step()
        assert opt.last_step_info.lr == pytest.approx(0.01 * (1.0 - 0.01 * s), rel=1e-12)
        sched.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) < 0.6 * sum(losses[:5])
