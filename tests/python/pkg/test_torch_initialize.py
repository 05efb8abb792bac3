"""deepspeed_c.torch.initialize: its arguments and return values as
deepspeed.initialize has them, refusals naming what is not supported,
frozen parameters, and the engine-owned optimizer / LR scheduler objects."""
import json

import pytest

torch = pytest.importorskip("torch")
import deepspeed_c  # noqa: E402
import deepspeed_c.torch as ds  # noqa: E402
import torch_helpers as th  # noqa: E402


def test_returns_engine_optimizer_none_scheduler():
    model = th.mlp()
    result = ds.initialize(model=model, model_parameters=model.parameters(), config=th.config(),
                           distributed_port=29500, dist_init_required=True)
    engine, opt, loader, sched = result
    assert isinstance(engine, torch.nn.Module) and engine.module is model
    assert isinstance(opt, torch.optim.Optimizer) and loader is None
    assert sched.get_lr() == engine.get_lr()
    assert engine.train_micro_batch_size_per_gpu() == 8 and engine.gradient_accumulation_steps() == 1
    assert engine.train_batch_size() == 8
    assert engine.global_steps == engine.global_samples == engine.skipped_steps == 0
    assert engine.get_global_grad_norm() is None
    model.vocab_size = 42
    assert engine.vocab_size == 42  # attributes fall back to the module, as DeepSpeed's engine
    assert engine.eval() is engine and not model.training
    engine.train()
    assert model.training


@pytest.mark.parametrize("kind", ["path", "json", "config_params", "args"])
def test_config_forms(tmp_path, kind):
    cfg = th.config()
    model = th.mlp()
    if kind == "path":
        p = tmp_path / "ds.json"
        p.write_text(json.dumps(cfg))
        engine, *_ = ds.initialize(model=model, config=str(p))
    elif kind == "json":
        engine, *_ = ds.initialize(model=model, config=json.dumps(cfg))
    elif kind == "config_params":
        engine, *_ = ds.initialize(model=model, config_params=cfg)
    else:
        class Args:
            deepspeed_config = cfg
        engine, *_ = ds.initialize(args=Args(), model=model)
    assert engine.get_lr()[0] == pytest.approx(th.warmup_decay_lr(-1, cfg["scheduler"]["params"]))


@pytest.mark.parametrize("arg", ["optimizer", "lr_scheduler", "training_data", "collate_fn", "mpu"])
def test_client_objects_are_refused_by_name(arg):
    model = th.mlp()
    with pytest.raises(deepspeed_c.UnsupportedError, match=arg):
        ds.initialize(model=model, config=th.config(), **{arg: object()})
    with pytest.raises(NotImplementedError, match="dist_init_required"):
        ds.initialize(model=model, config=th.config(), dist_init_required=False)
    with pytest.raises(NotImplementedError, match="distributed_port"):
        ds.initialize(model=model, config=th.config(), distributed_port=1234)


def test_bad_config_raises_config_error_with_the_key():
    cfg = th.config()
    cfg["gradient_clippin"] = 1.0
    with pytest.raises(deepspeed_c.ConfigError, match="gradient_clippin"):
        ds.initialize(model=th.mlp(), config=cfg)


def test_frozen_and_unlisted_parameters_are_not_trained():
    model = th.mlp()
    model[0].bias.requires_grad_(False)
    listed = [p for n, p in model.named_parameters() if n != "2.bias"]
    engine, opt, _, _ = ds.initialize(model=model, model_parameters=listed, config=th.config())
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if n in ("0.bias", "2.bias")}
    infos = {i.name: i.trainable for i in engine.core.named_parameters()}
    assert infos == {"0.weight": True, "0.bias": False, "2.weight": True, "2.bias": False}
    assert len(opt.param_groups[0]["params"]) == 2
    th.train(engine, th.batches(3), 3)
    for n, v in frozen.items():
        assert torch.equal(dict(model.named_parameters())[n].detach(), v), n
    assert not torch.equal(model[0].weight.detach(), th.mlp()[0].weight)


def test_param_groups_with_their_own_settings_are_refused():
    model = th.mlp()
    groups = [{"params": [model[0].weight, model[2].weight]},
              {"params": [model[0].bias, model[2].bias], "weight_decay": 0.0}]
    with pytest.raises(deepspeed_c.UnsupportedError, match="weight_decay"):
        ds.initialize(model=model, model_parameters=groups, config=th.config())
    engine, *_ = ds.initialize(model=model, model_parameters=[{"params": list(model.parameters())}],
                               config=th.config())
    assert all(i.trainable for i in engine.core.named_parameters())


def _deepspeed_moe_groups(model):
    """What DeepSpeed's split_params_into_different_moe_groups_for_optimizer
    returns for {"name": "parameters", "params": model.parameters()} when the
    last Linear is an expert (DeepSpeed's MoE marks expert parameters
    allreduce = False, group_name = "ep_size_<ep>")."""
    for p in model[2].parameters():
        p.allreduce = False
        p.group_name = "ep_size_1"
    return [{"name": "parameters", "params": [model[0].weight, model[0].bias]},
            {"name": "ep_size_1", "moe": True, "params": [model[2].weight, model[2].bias]}]


def test_deepspeed_moe_param_groups_train_as_one_group():
    """moe_param_groups: DeepSpeed's MoE group tags set no hyperparameter, so the
    groups train exactly as the plain parameter list (same config, same data)."""
    data = th.batches(4)
    tagged = th.mlp()
    engine, opt, _, _ = ds.initialize(model=tagged, model_parameters=_deepspeed_moe_groups(tagged),
                                      config=th.config())
    plain = th.mlp()
    ref, _, _, _ = ds.initialize(model=plain, model_parameters=plain.parameters(), config=th.config())
    assert th.train(engine, data, 4) == th.train(ref, data, 4)
    for (n, a), (_, b) in zip(tagged.named_parameters(), plain.named_parameters()):
        assert torch.equal(a.detach(), b.detach()), n
    # the facade accepts the same groups
    facade = th.mlp()
    ds.Optimizer(_deepspeed_moe_groups(facade), th.config(gas=1))


def test_sharded_moe_groups_on_several_ranks_are_refused():
    from deepspeed_c.torch._moe_groups import refuse_sharded_experts
    experts = [torch.nn.Parameter(torch.zeros(2))]
    experts[0].group_name = "ep_size_2"
    refuse_sharded_experts(experts, 1, "one rank")            # one rank: nothing is sharded
    with pytest.raises(deepspeed_c.UnsupportedError, match="ep_size_2"):
        refuse_sharded_experts(experts, 2, "initialize")
    experts[0].group_name = "ep_size_1"
    refuse_sharded_experts(experts, 2, "ep_size 1")           # replicated experts: plain data parallelism


def test_scheduler_object_follows_the_engine():
    model = th.mlp()
    engine, opt, _, sched = ds.initialize(model=model, config=th.config())
    with pytest.raises(AssertionError, match="step"):
        sched.get_last_lr()
    with pytest.raises(NotImplementedError, match="engine.step"):
        sched.step()
    with pytest.raises(NotImplementedError, match="engine.step"):
        opt.step()
    th.train(engine, th.batches(3), 3)
    lr = th.warmup_decay_lr(2, th.config()["scheduler"]["params"])
    assert sched.get_last_lr()[0] == pytest.approx(lr, rel=1e-12) == engine.get_lr()[0]
    opt.param_groups[0]["lr"] = 0.5
    assert engine.get_lr() == [0.5]
    cfg = th.config()
    del cfg["scheduler"]
    assert ds.initialize(model=th.mlp(), config=cfg)[3] is None


def test_optimizer_zero_grad_drops_the_window():
    model = th.mlp()
    engine, opt, _, _ = ds.initialize(model=model, config=th.config(gas=2))
    x, y = th.batches(1)[0]
    engine.backward(th.mse(engine, x, y))
    opt.zero_grad()
    from deepspeed_c.torch.utils import safe_get_full_grad
    assert all(float(safe_get_full_grad(p).abs().sum()) == 0.0 for p in model.parameters())


def test_cuda_modules_are_refused_by_name():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model = th.mlp().cuda()
    with pytest.raises(deepspeed_c.UnsupportedError, match="0.weight"):
        ds.initialize(model=model, config=th.config())


def test_a_module_belongs_to_one_engine_until_destroy():
    model = th.mlp()
    engine, *_ = ds.initialize(model=model, config=th.config())
    with pytest.raises(deepspeed_c.InvalidStateError, match="already trained"):
        ds.initialize(model=model, config=th.config())
    th.train(engine, th.batches(2), 2)
    trained = th.snapshot(model)
    engine.destroy()
    assert th.max_rel_diff(th.snapshot(model), trained) == 0.0
    assert model[0].weight.data_ptr() != 0
    # a plain torch module again: autograd fills p.grad, and a new engine may take it
    x, y = th.batches(1)[0]
    th.mse(model, x, y).backward()
    assert model[0].weight.grad is not None
    model.zero_grad(set_to_none=True)
    again, *_ = ds.initialize(model=model, config=th.config())
    assert th.max_rel_diff(th.snapshot(model), trained) == 0.0


def test_a_failed_initialize_leaves_the_module_usable(monkeypatch):
    import deepspeed_c.torch.engine as engine_module

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure after the parameters were attached")

    model = th.mlp()
    monkeypatch.setattr(engine_module, "EngineOptimizer", broken)
    with pytest.raises(RuntimeError, match="injected"):
        ds.initialize(model=model, config=th.config())
    monkeypatch.undo()
    assert all(not hasattr(p, "_deepspeed_c_binding") for p in model.parameters())
    x, y = th.batches(1)[0]
    th.mse(model, x, y).backward()          # no hook of the dead engine fires
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad(set_to_none=True)
    engine, *_ = ds.initialize(model=model, config=th.config())
    th.train(engine, th.batches(2), 2)
    assert engine.global_steps == 2


def test_the_engine_is_freed_without_the_cycle_collector():
    """No reference cycle through the gradient hooks: a script that drops the
    engine and the model frees the core engine at once (under several ranks
    its destruction ends the implicit MPI world before the interpreter exits)."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        model = th.mlp()
        engine, opt, _, sched = ds.initialize(model=model, config=th.config(gas=2))
        th.train(engine, th.batches(4), 4)
        x, y = th.batches(1)[0]
        engine.scale(th.mse(engine, x, y)).backward()
        dead_engine, dead_core = weakref.ref(engine), weakref.ref(engine.core)
        del engine, opt, sched
        assert dead_engine() is None and dead_core() is None
    finally:
        gc.enable()
