"""Engines on a GPU (Engine(..., device=, stream=)) and views in device memory.

This machine and CI have no GPU: creating an engine on cuda:0 fails with the
library's message (no CUDA in the build, or no device), and the device views
are checked on a View made by hand.
"""
from __future__ import annotations

import numpy as np
import pytest

import deepspeed_c as dsc
from deepspeed_c import errors
from deepspeed_c.view import KDL_CUDA, View


@pytest.fixture
def offload_config(adamw_config):
    """ZeRO-Offload at stage 2: what an engine on a GPU needs."""
    adamw_config["zero_optimization"] = {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    return adamw_config


class FakeTorchDevice:   # what torch.device looks like to Engine
    def __init__(self, type: str, index: int = None) -> None:
        self.type, self.index = type, index


@pytest.mark.parametrize("device", ["cuda:0", "cuda", (KDL_CUDA, 0), FakeTorchDevice("cuda", 0)])
def test_cuda_engine_without_cuda_or_gpu(offload_config, device):
    if dsc.build_info().get("cuda"):
        pytest.skip("a CUDA build: cuda:0 may exist here")
    with pytest.raises((dsc.UnsupportedError, dsc.DeviceError)) as ei:
        dsc.Engine(offload_config, device=device)
    assert ei.value.status in (errors.UNSUPPORTED, errors.DEVICE)
    assert "cuda:0" in str(ei.value)


def test_the_cpu_device_forms_make_an_ordinary_engine(adamw_config):
    for device in (None, "cpu", "cpu:0", (1, 0), FakeTorchDevice("cpu")):
        with dsc.Engine(adamw_config, device=device, stream=None) as e:
            e.add_param("w", np.ones(4, np.float32))
            e.init()
            v = e.param("w")
            assert v.__dlpack_device__() == (1, 0) and v.device == "cpu"
            np.testing.assert_array_equal(v.numpy(), np.ones(4, np.float32))


def test_a_stream_needs_a_gpu_engine(adamw_config):
    class FakeStream:   # what torch.cuda.Stream looks like to Engine
        cuda_stream = 0x1

    for stream in (0x1, FakeStream()):
        with pytest.raises(dsc.InvalidArgumentError) as ei:
            dsc.Engine(adamw_config, stream=stream)
        assert ei.value.status == errors.INVALID_ARGUMENT
        assert "options.cuda_stream" in str(ei.value)
    for bad in ("0x1", 1.5, True):
        with pytest.raises(TypeError, match="stream"):
            dsc.Engine(adamw_config, stream=bad)


@pytest.mark.parametrize("device", ["gpu", "cuda:-1", "cuda:x", "cuda:", "cuda: 1", "CUDA:0", "",
                                    (2, -1), (3, 0), (1, 1)])
def test_bad_device_is_named(adamw_config, device):
    with pytest.raises(ValueError) as ei:
        dsc.Engine(adamw_config, device=device)
    assert repr(device) in str(ei.value)


@pytest.mark.parametrize("device", [1.5, 2, ["cuda", 0]])
def test_device_of_the_wrong_type(adamw_config, device):
    with pytest.raises(TypeError, match="device"):
        dsc.Engine(adamw_config, device=device)


def _cuda_view(host: np.ndarray, dtype=(2, 32)) -> View:
    """A view that says cuda:0 over host memory (nothing may read it from the host)."""
    code, bits = dtype
    return View(None, "w", (host.ctypes.data, host.shape, None, code, bits, 1, KDL_CUDA, 0, 0))


def test_device_view_refuses_numpy():
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = _cuda_view(host)
    assert v.__dlpack_device__() == (2, 0) and v.device == "cuda:0"
    assert "cuda:0" in repr(v)
    for read in (v.numpy, lambda: np.asarray(v)):
        with pytest.raises(TypeError) as ei:
            read()
        assert "cuda:0" in str(ei.value) and "w" in str(ei.value)
    with pytest.raises(TypeError, match="cuda:0"):
        _cuda_view(np.zeros(2, np.uint16), (4, 16)).numpy()   # bfloat16 too


def test_device_view_exports_dlpack_on_its_device():
    v = _cuda_view(np.zeros(3, np.float32))
    cap = v.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    assert type(v.__dlpack__(stream=1, dl_device=(KDL_CUDA, 0))).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="not"):
        v.__dlpack__(dl_device=(1, 0))


def test_device_tensors_reach_the_library_unchanged(small_engine):
    # A gradient in device memory goes through DLPack as it is (no host copy):
    # the CPU engine sees cuda:0 and refuses it, naming the device.
    g = _cuda_view(np.ones((3, 4), np.float32))
    with pytest.raises(dsc.InvalidArgumentError) as ei:
        small_engine.accumulate_grad("w", g)
    assert "cuda:0" in str(ei.value)
    np.testing.assert_array_equal(small_engine.grad("w").numpy(), np.zeros((3, 4), np.float32))
