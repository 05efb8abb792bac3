"""Every status becomes its exception class, with the library's message."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import deepspeed_c as dsc
from deepspeed_c import errors
from deepspeed_c._native import ll

EXPECTED = {
    "INVALID_ARGUMENT": (dsc.InvalidArgumentError, ValueError),
    "INVALID_HANDLE": (dsc.InvalidStateError, None),
    "INVALID_STATE": (dsc.InvalidStateError, None),
    "INVALID_CONFIG": (dsc.ConfigError, ValueError),
    "UNSUPPORTED": (dsc.UnsupportedError, NotImplementedError),
    "NOT_FOUND": (dsc.NotFoundError, KeyError),
    "OUT_OF_MEMORY": (dsc.DeepSpeedMemoryError, MemoryError),
    "DEVICE_OUT_OF_MEMORY": (dsc.DeepSpeedMemoryError, MemoryError),
    "DEVICE": (dsc.DeviceError, None),
    "COMM": (dsc.CommError, None),
    "TIMEOUT": (dsc.DeepSpeedTimeout, TimeoutError),
    "IO": (dsc.CheckpointError, None),
    "FORMAT": (dsc.CheckpointError, None),
    "ABI_MISMATCH": (dsc.AbiMismatchError, None),
    "INTERNAL": (dsc.InternalError, None),
}


def test_every_header_status_has_a_class():
    header_codes = {n[len("DS_ERR_"):]: getattr(ll, n) for n in dir(ll) if n.startswith("DS_ERR_")}
    assert set(header_codes) == set(EXPECTED), "a status was added to the header: map it in errors.py"
    for name, code in header_codes.items():
        cls, builtin = EXPECTED[name]
        e = errors.error_for_status(code, f"msg {name}")
        assert type(e) is cls and isinstance(e, dsc.DeepSpeedError)
        if builtin is not None:
            assert isinstance(e, builtin)
        assert e.status == code and str(e) == f"msg {name}"


def test_unknown_status_gives_the_base_class():
    e = errors.error_for_status(999, "future status")
    assert type(e) is dsc.DeepSpeedError and e.status == 999


def test_config_typo_names_the_dotted_path_and_suggests(adamw_config):
    adamw_config["zero_optimization"] = {"stage": 2, "reduce_bucket_sise": 1000}
    with pytest.raises(dsc.ConfigError) as ei:
        dsc.Engine(adamw_config)
    msg = str(ei.value)
    assert "zero_optimization.reduce_bucket_sise" in msg
    assert "did you mean zero_optimization.reduce_bucket_size" in msg
    assert ei.value.status == ll.DS_ERR_INVALID_CONFIG
    assert isinstance(ei.value, ValueError)


def test_config_from_json_text_and_file(tmp_path, adamw_config):
    with dsc.Engine(json.dumps(adamw_config)) as e:
        assert e.gradient_accumulation_steps == 2
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(adamw_config))
    with dsc.Engine(path) as e:          # PathLike
        assert e.train_batch_size == 8
    with dsc.Engine(str(path)) as e:     # str path
        assert e.train_micro_batch_size_per_gpu == 4
    with pytest.raises(dsc.CheckpointError) as ei:   # DS_ERR_IO names the path
        dsc.Engine(str(tmp_path / "missing.json"))
    assert "missing.json" in str(ei.value)
    with pytest.raises(TypeError):
        dsc.Engine(42)


def test_real_calls_raise_their_classes(small_engine, tmp_path):
    e = small_engine
    with pytest.raises(dsc.NotFoundError) as ei:
        e.param("nope")
    assert "nope" in str(ei.value)
    with pytest.raises(dsc.InvalidArgumentError):
        e.accumulate_grad("w", np.zeros((4, 3), np.float32))   # wrong shape
    with pytest.raises(dsc.InvalidStateError):
        e.add_param("late", np.zeros(2, np.float32))           # after init
    with pytest.raises(dsc.InvalidArgumentError):
        e.lr = -1.0
    with pytest.raises(dsc.NotFoundError):
        e.load_checkpoint(tmp_path / "no_such_dir")
    with pytest.raises(dsc.NotFoundError) as ei:
        e.get_full_optimizer_state("w", "momentum")
    assert "exp_avg" in str(ei.value)   # the message lists the valid keys


def test_set_stream_on_a_cpu_engine(small_engine):
    class FakeStream:   # what torch.cuda.Stream looks like to set_stream
        cuda_stream = 0x1234

    for stream in (None, 0x1234, FakeStream()):   # NULL, a raw cudaStream_t, a stream object
        with pytest.raises(dsc.InvalidStateError) as ei:
            small_engine.set_stream(stream)
        assert ei.value.status == errors.INVALID_STATE
        assert "trains on the CPU" in str(ei.value)
    for bad in ("0x1234", 1.5, True, object()):
        with pytest.raises(TypeError):
            small_engine.set_stream(bad)
    with pytest.raises(TypeError):       # the low-level call checks its argument too
        ll.ds_engine_set_stream(small_engine._h(), "0x1234")


def test_unsupported_feature(adamw_config):
    # Parameters on NVMe are swapped per ZeRO-3 partition: below stage 3 they are refused.
    adamw_config["zero_optimization"] = {"stage": 2, "offload_param": {"device": "nvme", "nvme_path": "/tmp"}}
    with pytest.raises(dsc.UnsupportedError) as ei:
        dsc.Engine(adamw_config)
    assert "offload_param" in str(ei.value)
    assert isinstance(ei.value, NotImplementedError)


def test_corrupt_checkpoint_is_a_checkpoint_error(small_engine, tmp_path):
    e = small_engine
    path = e.save_checkpoint(tmp_path, tag="t1")
    with open(os.path.join(path, "model.safetensors"), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    before = e.get_full_fp32_param("w")
    with pytest.raises(dsc.CheckpointError) as ei:
        e.load_checkpoint(tmp_path, tag="t1")
    assert "model.safetensors" in str(ei.value)
    np.testing.assert_array_equal(e.get_full_fp32_param("w"), before)  # nothing changed


def test_abi_mismatch_refuses_import(monkeypatch):
    from deepspeed_c import _native
    monkeypatch.setattr(_native.ll, "ds_abi_version", lambda: int(ll.DS_ABI_VERSION) + 1)
    with pytest.raises(ImportError) as ei:
        _native._check_abi()
    assert "ABI mismatch" in str(ei.value) and "reinstall" in str(ei.value)
