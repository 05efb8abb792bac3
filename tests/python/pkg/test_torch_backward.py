"""engine.backward variants (DeepSpeed PR #7665): non-scalar outputs with a
gradient, engine.scale(loss).backward(), out.backward(g), retain_graph,
scale_wrt_gas, the fp16 misuse error, and no_sync."""
import pytest

torch = pytest.importorskip("torch")
import deepspeed_c  # noqa: E402
import deepspeed_c.torch as ds  # noqa: E402
from deepspeed_c.torch.utils import safe_get_full_grad  # noqa: E402
import torch_helpers as th  # noqa: E402


def make(gas=2, **extra):
    model = th.mlp()
    engine, _, _, _ = ds.initialize(model=model, config=th.config(gas=gas, **extra))
    return engine


def grads(engine):
    return {n: safe_get_full_grad(p) for n, p in engine.module.named_parameters()}


def expected_grads(loss_fn, factor):
    """torch's own gradients of loss_fn(model) x factor, on a fresh copy."""
    model = th.mlp()
    (loss_fn(model) * factor).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def assert_close(got, want, rel=1e-6):
    for n in want:
        assert torch.allclose(got[n], want[n], rtol=rel, atol=1e-9), n


X, Y = th.batches(1)[0]
G = torch.linspace(-1.0, 1.0, X.shape[0] * th.OUT).reshape(X.shape[0], th.OUT)


def test_engine_backward_divides_by_gas_and_hands_over_every_gradient():
    engine = make(gas=2)
    ret = engine.backward(th.mse(engine, X, Y))
    assert ret.item() == pytest.approx(th.mse(th.mlp(), X, Y).item() / 2)
    assert_close(grads(engine), expected_grads(lambda m: th.mse(m, X, Y), 0.5))
    assert all(p.grad is None for p in engine.module.parameters())  # the engine holds the only copy


def test_backward_with_gradient_for_a_non_scalar_output():
    engine = make(gas=2)
    engine.backward(engine(X), gradient=G)
    assert_close(grads(engine), expected_grads(lambda m: (m(X) * G).sum(), 0.5))
    with pytest.raises(ValueError, match="scalar"):
        engine.backward(engine(X))


def test_plain_out_backward_and_scaled_loss_backward_match_engine_backward():
    engine = make(gas=2)
    engine(X).backward(G)  # the output hook divides by gas, the epilogue runs at the end of autograd
    assert not engine._pending_epilogue  # the queued autograd callback ran the engine's backward
    assert_close(grads(engine), expected_grads(lambda m: (m(X) * G).sum(), 0.5))
    engine.step()          # micro-step 1 (no boundary)
    engine.scale(th.mse(engine, X, Y)).backward()
    engine.step()          # the boundary: both micro-steps applied
    assert engine.global_steps == 1 and engine.micro_steps == 2


def test_retain_graph_and_scale_wrt_gas_false():
    engine = make(gas=2)
    loss = th.mse(engine, X, Y)
    engine.backward(loss, retain_graph=True)
    engine.backward(loss, scale_wrt_gas=False)  # the same graph again, not divided by gas
    half = expected_grads(lambda m: th.mse(m, X, Y), 0.5)
    whole = expected_grads(lambda m: th.mse(m, X, Y), 1.0)
    assert_close(grads(engine), {n: half[n] + whole[n] for n in half})
    with pytest.raises(RuntimeError):  # the graph is freed now, as torch does
        engine.backward(loss)


def test_fp16_unscaled_plain_backward_raises_deepspeeds_error_and_engine_stays_usable():
    model = th.Fp32ComputeMLP()
    engine, opt, _, _ = ds.initialize(model=model, config=th.config(gas=1, fp16={"enabled": True}))
    with pytest.raises(RuntimeError, match="Loss scaling is required for this configuration") as info:
        th.mse(engine, X, Y).backward()
    assert isinstance(info.value, deepspeed_c.DeepSpeedError)
    assert all(float(safe_get_full_grad(p).abs().sum()) == 0.0 for p in model.parameters())
    engine.scale(th.mse(engine, X, Y)).backward()
    engine.step()
    assert engine.was_step_applied()
    assert opt.cur_scale == opt.loss_scale == 2.0 ** 16


def test_no_sync_rules():
    engine = make(gas=1)
    with engine.no_sync():
        engine.backward(th.mse(engine, X, Y))
        with pytest.raises(AssertionError, match="inside no_sync"):
            engine.step()
        with pytest.raises(AssertionError, match="reentry"):
            with engine.no_sync():
                pass
    engine.backward(th.mse(engine, X, Y))
    assert_close(grads(engine), expected_grads(lambda m: th.mse(m, X, Y), 2.0))
    engine.step()
    assert engine.global_steps == 1
    for stage in (2, 3):
        e = make(gas=1, zero_optimization={"stage": stage})
        with pytest.raises(AssertionError, match=f"ZeRO stage {stage}"):
            with e.no_sync():
                pass
