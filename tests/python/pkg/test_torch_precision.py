"""bf16 and fp16 training through deepspeed_c.torch.initialize: the module
becomes 16-bit views of the engine's working weights, bf16 learns, and an
fp16 overflow (a huge input) skips the step, is counted, and halves the scale."""
import pytest

torch = pytest.importorskip("torch")
import deepspeed_c.torch as ds  # noqa: E402
from deepspeed_c.torch.utils import safe_get_full_fp32_param  # noqa: E402
import torch_helpers as th  # noqa: E402


def test_bf16_module_is_bf16_views_and_the_loss_falls():
    model = th.mlp()
    engine, _, _, _ = ds.initialize(model=model, config=th.config(gas=1, bf16={"enabled": True}))
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    data = th.batches(40)
    losses = th.train(engine, [(x.bfloat16(), y) for x, y in data], 40)
    print(f"bf16: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5
    assert engine.skipped_steps == 0
    # the bf16 working weights are the fp32 masters rounded
    for p in model.parameters():
        assert torch.equal(p.detach(), safe_get_full_fp32_param(p).bfloat16())


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_fp16_overflow_is_skipped_counted_and_halves_the_scale(stage):
    model = th.Fp32ComputeMLP()
    cfg = th.config(gas=1, fp16={"enabled": True, "initial_scale_power": 8, "hysteresis": 1},
                    zero_optimization={"stage": stage})
    engine, opt, _, sched = ds.initialize(model=model, config=cfg)
    assert all(p.dtype == torch.float16 for p in model.parameters())
    data = th.batches(6)
    th.train(engine, data, 3)
    assert engine.skipped_steps == 0 and opt.cur_scale == 256.0
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    lr_before = engine.get_lr()
    x, y = data[3]
    engine.backward(th.mse(engine, x, y * 1e6))  # a huge target: the fp16 gradients overflow
    engine.step()
    assert engine.skipped_steps == 1
    assert not engine.was_step_applied()
    assert opt.cur_scale == 128.0
    assert engine.global_steps == 4
    assert engine.get_lr() == lr_before                      # the schedule did not advance
    assert sched.state_dict() == {"last_batch_iteration": 2}
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), before[n]), n           # the step changed nothing
    th.train(engine, data[4:], 2)
    assert engine.skipped_steps == 1 and engine.global_steps == 6
    assert not torch.equal(model.fc1.weight.detach(), before["fc1.weight"])


class _RecordsInput(th.Fp32ComputeMLP):
    def forward(self, x):
        self.seen = x.dtype
        return super().forward(x)


@pytest.mark.parametrize("auto_cast", [True, False])
def test_fp16_auto_cast_casts_floating_inputs_to_half(auto_cast):
    model = _RecordsInput()
    cfg = th.config(gas=1, fp16={"enabled": True, "auto_cast": auto_cast})
    engine, *_ = ds.initialize(model=model, config=cfg)
    x, _ = th.batches(1)[0]
    engine(x)
    assert model.seen == (torch.float16 if auto_cast else torch.float32)
