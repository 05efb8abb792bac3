"""Checkpoint round trip through the Python API."""
from __future__ import annotations

import os

import numpy as np
import pytest

import deepspeed_c as dsc


def _train(e, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        e.accumulate_grad("w", rng.standard_normal((3, 4)).astype(np.float32))
        e.accumulate_grad("b", rng.standard_normal(4).astype(np.float32))
        e.backward()
        e.step()


def _make(cfg):
    e = dsc.Engine(cfg)
    e.add_param("w", np.zeros((3, 4), np.float32))
    e.add_param("b", np.zeros(4, np.float32))
    e.init()
    return e


def test_round_trip_with_client_state(adamw_config, tmp_path):
    adamw_config["scheduler"] = {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}
    a = _make(adamw_config)
    _train(a, 8, seed=1)
    state = {"epoch": 3, "note": "héllo", "nested": [1, 2.5, None]}
    path = a.save_checkpoint(tmp_path, client_state=state)
    assert path == os.path.join(str(tmp_path), "global_step4") and os.path.isdir(path)
    with open(tmp_path / "latest") as f:
        assert f.read().strip() == "global_step4"

    b = _make(adamw_config)
    got_path, got_state = b.load_checkpoint(tmp_path)
    assert got_path == path and got_state == state
    assert (b.global_steps, b.global_samples, b.lr) == (a.global_steps, a.global_samples, a.lr)
    for name in ("w", "b"):
        np.testing.assert_array_equal(b.get_full_fp32_param(name), a.get_full_fp32_param(name))
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(b.get_full_optimizer_state(name, key),
                                          a.get_full_optimizer_state(name, key))
    # Resuming continues bit for bit.
    _train(a, 6, seed=2)
    _train(b, 6, seed=2)
    np.testing.assert_array_equal(b.get_full_fp32_param("w"), a.get_full_fp32_param("w"))
    a.close()
    b.close()


def test_load_flags(adamw_config, tmp_path):
    a = _make(adamw_config)
    _train(a, 4, seed=3)
    a.save_checkpoint(tmp_path, tag="t")
    b = _make(adamw_config)
    b.load_checkpoint(tmp_path, tag="t", load_module_only=True)
    np.testing.assert_array_equal(b.get_full_fp32_param("w"), a.get_full_fp32_param("w"))
    assert b.global_steps == 0
    np.testing.assert_array_equal(b.get_full_optimizer_state("w", "exp_avg"), np.zeros((3, 4), np.float32))


def test_non_strict_load_and_the_warning_reaches_logging(adamw_config, tmp_path, caplog):
    a = _make(adamw_config)
    a.save_checkpoint(tmp_path, tag="t")
    c = dsc.Engine(adamw_config)
    c.add_param("w", np.ones((3, 4), np.float32))
    c.add_param("extra", np.ones(2, np.float32))
    c.init()
    with pytest.raises(dsc.CheckpointError):
        c.load_checkpoint(tmp_path, tag="t")
    with caplog.at_level("WARNING", logger="deepspeed_c"):
        c.load_checkpoint(tmp_path, tag="t", load_module_strict=False)
    assert any(r.name == "deepspeed_c" and "extra" in r.getMessage() for r in caplog.records), caplog.text
    np.testing.assert_array_equal(c.get_full_fp32_param("extra"), np.ones(2, np.float32))


def test_safetensors_readable(adamw_config, tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    a = _make(adamw_config)
    _train(a, 2, seed=4)
    path = a.save_checkpoint(tmp_path)
    tensors = st.load_file(os.path.join(path, "model.safetensors"))
    np.testing.assert_array_equal(tensors["w"], a.get_full_fp32_param("w"))
    out = a.save_16bit_model(tmp_path / "export")
    assert set(st.load_file(out)) == {"w", "b"}


def test_save_inside_an_accumulation_window_is_refused(adamw_config, tmp_path):
    a = _make(adamw_config)
    a.accumulate_grad("w", np.ones((3, 4), np.float32))
    with pytest.raises(dsc.InvalidStateError):
        a.save_checkpoint(tmp_path)
    assert not (tmp_path / "latest").exists()
