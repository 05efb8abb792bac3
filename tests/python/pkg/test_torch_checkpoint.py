"""engine.save_checkpoint / load_checkpoint through deepspeed_c.torch: the
resumed run continues exactly (weights, optimizer, schedule, counters), the
module's buffers come back, and client_state round-trips (JSON, or any
picklable object)."""
import pytest

torch = pytest.importorskip("torch")
import deepspeed_c.torch as ds  # noqa: E402
import torch_helpers as th  # noqa: E402


def bn_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(th.IN, th.HIDDEN), torch.nn.BatchNorm1d(th.HIDDEN),
                               torch.nn.Tanh(), torch.nn.Linear(th.HIDDEN, th.OUT))


@pytest.mark.parametrize("client_state", [{"epoch": 3, "note": "json"},
                                          {"epoch": 3, "rng": torch.arange(4.0)}])
def test_resume_continues_bit_exactly(tmp_path, client_state):
    cfg = th.config(gas=2)
    data = th.batches(16)
    first, _, _, _ = ds.initialize(model=bn_model(0), config=cfg)
    th.train(first, data, 8)
    path = first.save_checkpoint(str(tmp_path), client_state=client_state)
    assert path.endswith("global_step4")
    saved = th.snapshot(first.module)
    saved_lr = first.get_lr()
    saved_buffers = {k: v.clone() for k, v in first.module.named_buffers()}
    th.train(first, data[8:], 8)
    want = th.snapshot(first.module)

    second, opt, _, sched = ds.initialize(model=bn_model(7), config=cfg)
    load_path, state = second.load_checkpoint(str(tmp_path))
    assert load_path == path
    assert state.keys() == client_state.keys() and state["epoch"] == 3
    if "rng" in client_state:
        assert torch.equal(state["rng"], client_state["rng"])
    else:
        assert state == client_state
    assert th.max_rel_diff(th.snapshot(second.module), saved) == 0.0
    for k, v in second.module.named_buffers():
        assert torch.equal(v, saved_buffers[k]), k
    assert second.global_steps == 4 and sched.state_dict() == {"last_batch_iteration": 3}
    assert second.get_lr() == saved_lr
    th.train(second, data[8:], 8)
    assert th.max_rel_diff(th.snapshot(second.module), want) == 0.0
    assert second.get_lr() == first.get_lr()
    assert opt.cur_scale == 1.0


def test_load_module_only_keeps_the_fresh_optimizer(tmp_path):
    cfg = th.config(gas=1)
    data = th.batches(4)
    first, _, _, _ = ds.initialize(model=th.mlp(), config=cfg)
    th.train(first, data, 4)
    first.save_checkpoint(str(tmp_path), tag="t4")
    second, opt, _, _ = ds.initialize(model=th.mlp(3), config=cfg)
    second.load_checkpoint(str(tmp_path), tag="t4", load_module_only=True)
    assert th.max_rel_diff(th.snapshot(second.module), th.snapshot(first.module)) == 0.0
    assert second.global_steps == 0
    assert all(float(s["exp_avg"].abs().sum()) == 0.0 for s in opt.state_dict()["state"].values())


def test_missing_checkpoint_returns_none_none_as_deepspeed(tmp_path, caplog):
    engine, *_ = ds.initialize(model=th.mlp(), config=th.config(gas=1))
    assert engine.load_checkpoint(str(tmp_path)) == (None, None)
    assert "Unable to find latest file" in caplog.text
    engine.save_checkpoint(str(tmp_path), tag="t0")
    assert engine.load_checkpoint(str(tmp_path), tag="nope") == (None, None)
    assert engine.load_checkpoint(str(tmp_path), tag="t0")[0].endswith("t0")
