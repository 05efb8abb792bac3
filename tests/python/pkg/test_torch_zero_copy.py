"""The module's parameters are the engine's memory (zero copy), and the
deepspeed.utils-style safe_get/set_full_* accessors reach the engine."""
import pytest

torch = pytest.importorskip("torch")
import deepspeed_c.torch as ds  # noqa: E402
from deepspeed_c.torch import utils  # noqa: E402
import torch_helpers as th  # noqa: E402


def make(**extra):
    model = th.mlp()
    engine, opt, _, _ = ds.initialize(model=model, config=th.config(gas=1, **extra))
    return model, engine, opt


def test_parameters_alias_the_engine_for_its_life():
    model, engine, _ = make()
    ptrs = {n: p.data_ptr() for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        assert ptrs[n] == engine.core.param(n).data_ptr
    data = th.batches(5)
    th.train(engine, data, 5)
    for n, p in model.named_parameters():
        assert p.data_ptr() == ptrs[n] == engine.core.param(n).data_ptr
        assert torch.equal(p.detach(), torch.from_numpy(engine.core.get_full_fp32_param(n)))


def test_safe_set_full_fp32_param_is_visible_through_the_parameter():
    model, engine, _ = make()
    w = model[0].weight
    new = torch.arange(w.numel(), dtype=torch.float32).reshape(w.shape) / 7.0
    utils.safe_set_full_fp32_param(w, new)
    assert torch.equal(w.detach(), new)
    assert torch.equal(utils.safe_get_full_fp32_param(w), new)


def test_safe_set_full_fp32_param_rounds_into_bf16_working_weights():
    model, engine, _ = make(bf16={"enabled": True})
    w = model[2].weight
    new = torch.full(w.shape, 1.0 + 2.0 ** -12)
    utils.safe_set_full_fp32_param(w, new)
    assert torch.equal(utils.safe_get_full_fp32_param(w), new)
    assert torch.equal(w.detach(), new.bfloat16())


def test_grad_and_optimizer_state_accessors():
    model, engine, opt = make()
    x, y = th.batches(1)[0]
    ref = th.mlp()
    th.mse(ref, x, y).backward()
    engine.backward(th.mse(engine, x, y))
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert p.grad is None
        assert torch.allclose(utils.safe_get_full_grad(p), q.grad, rtol=1e-6, atol=1e-9), n
    b = model[2].bias
    utils.safe_set_full_grad(b, torch.ones(b.shape))
    assert torch.equal(utils.safe_get_full_grad(b), torch.ones(b.shape))
    engine.step()
    # one AdamW step: exp_avg = (1 - beta1) * g (clipping scales g), exp_avg_sq = (1 - beta2) * g^2
    m = utils.safe_get_full_optimizer_state(b, "exp_avg")
    v = utils.safe_get_full_optimizer_state(b, "exp_avg_sq")
    assert torch.allclose(v, m * m / 0.1 / 0.1 * 0.01, rtol=1e-5)
    utils.safe_set_full_optimizer_state(b, torch.zeros(b.shape), "exp_avg")
    assert float(utils.safe_get_full_optimizer_state(b, "exp_avg").abs().sum()) == 0.0
    assert opt.state_dict()["state"][3]["exp_avg"].abs().sum() == 0


def test_unmanaged_tensors_give_none_as_deepspeed():
    free = torch.nn.Parameter(torch.zeros(3))
    assert utils.safe_get_full_fp32_param(free) is None
    assert utils.safe_get_full_grad(free) is None
    assert utils.safe_get_full_optimizer_state(free, "exp_avg") is None
    utils.safe_set_full_fp32_param(free, torch.ones(3))  # left alone
    assert float(free.detach().sum()) == 0.0
