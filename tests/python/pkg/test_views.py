"""Views are zero copy, read-only for numpy, stable for the engine's life (ZeRO 0-2)."""
from __future__ import annotations

import numpy as np
import pytest

import deepspeed_c as dsc

torch = pytest.importorskip("torch")


def test_view_pointers_are_the_engines(small_engine):
    v = small_engine.param("w")
    t = torch.from_dlpack(v)
    a = v.numpy()
    assert t.data_ptr() == v.data_ptr == a.__array_interface__["data"][0]
    assert t.shape == (3, 4) and t.dtype == torch.float32
    np.testing.assert_array_equal(t.numpy(), small_engine.get_full_fp32_param("w"))


def test_numpy_view_is_read_only(small_engine):
    a = small_engine.param("w").numpy()
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    b = np.asarray(small_engine.param("w"))   # __array_interface__ says read-only too
    assert not b.flags.writeable


def test_set_full_fp32_param_is_visible_through_an_earlier_view(small_engine):
    v = small_engine.param("w")
    t = torch.from_dlpack(v)
    new = np.arange(12, dtype=np.float32).reshape(3, 4)
    small_engine.set_full_fp32_param("w", new)
    np.testing.assert_array_equal(t.numpy(), new)
    np.testing.assert_array_equal(v.numpy(), new)


def test_view_survives_steps_and_a_checkpoint_load(small_engine, tmp_path):
    e = small_engine
    t = torch.from_dlpack(e.param("w"))
    ptr = t.data_ptr()
    path = e.save_checkpoint(tmp_path)
    saved = t.clone()
    for _ in range(6):      # three optimizer steps (gradient_accumulation_steps 2)
        e.accumulate_grad("w", np.ones((3, 4), np.float32))
        e.accumulate_grad("b", np.ones(4, np.float32))
        e.backward()
        e.step()
    assert e.param("w").data_ptr == ptr
    assert not torch.equal(t, saved)                 # the steps changed the weights in place
    e.load_checkpoint(tmp_path, tag=path.rsplit("/", 1)[1])
    assert e.param("w").data_ptr == ptr
    assert torch.equal(t, saved)                     # and the load restored them in place


def test_grad_view_is_the_accumulation_buffer(small_engine):
    e = small_engine
    g = torch.from_dlpack(e.grad("w"))
    e.accumulate_grad("w", np.full((3, 4), 2.0, np.float32))   # divided by gas = 2
    assert torch.all(g == 1.0)
    np.testing.assert_array_equal(e.get_full_grad("w"), np.ones((3, 4), np.float32))


@pytest.mark.parametrize("dtype,tdtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_16bit_views(adamw_config, dtype, tdtype):
    adamw_config[dtype] = {"enabled": True}
    with dsc.Engine(adamw_config) as e:
        e.add_param("w", np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
        e.init()
        v = e.param("w")
        assert v.dtype == {"bf16": "bfloat16", "fp16": "float16"}[dtype]
        t = torch.from_dlpack(v)
        assert t.dtype == tdtype and t.data_ptr() == v.data_ptr
        master = e.get_full_fp32_param("w")
        np.testing.assert_array_equal(t.float().numpy(), torch.from_numpy(master).to(tdtype).float().numpy())
        raw = v.numpy()
        assert raw.dtype == (np.uint16 if dtype == "bf16" else np.float16)
        if dtype == "bf16":
            assert not hasattr(v, "__array_interface__")


def test_torch_and_numpy_inputs_are_accepted(small_engine):
    e = small_engine
    g_t = torch.ones(3, 4, requires_grad=True)              # detached by the binding
    e.accumulate_grad("w", g_t)
    e.accumulate_grad("w", torch.ones(4, 3).t())             # strided (a transpose)
    e.accumulate_grad("w", np.ones((3, 4), np.float32)[::1])
    ro = np.ones((3, 4), np.float32)
    ro.flags.writeable = False                               # buffer-protocol route
    e.accumulate_grad("w", ro)
    np.testing.assert_allclose(e.get_full_grad("w"), np.full((3, 4), 2.0))   # 4 x 1 / gas 2
    with pytest.raises(TypeError):
        e.accumulate_grad("w", object())
    with pytest.raises(dsc.InvalidArgumentError):
        e.accumulate_grad("w", np.ones((3, 4), np.int32))


def test_views_keep_the_engine_alive_after_the_engine_object_is_gone(adamw_config):
    import gc
    e = dsc.Engine(adamw_config)
    e.add_param("w", np.full((2, 2), 3.0, np.float32))
    e.init()
    t = torch.from_dlpack(e.param("w"))
    del e
    gc.collect()
    assert torch.all(t == 3.0)
