"""A closed engine raises InvalidStateError from every method, and never crashes."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import deepspeed_c as dsc

X = np.zeros((3, 4), np.float32)
CALLS = {
    "add_param": ("x", X), "init": (), "named_parameters": (), "param_info": ("w",),
    "param": ("w",), "grad": ("w",), "accumulate_grad": ("w", X), "backward": (), "step": (),
    "gather": (["w"],), "release": (["w"],), "save_checkpoint": ("/nonexistent/x",),
    "load_checkpoint": ("/nonexistent/x",), "save_16bit_model": ("/nonexistent/x",),
    "get_full_fp32_param": ("w",), "set_full_fp32_param": ("w", X), "get_full_grad": ("w",),
    "set_full_grad": ("w", X), "get_full_optimizer_state": ("w", "exp_avg"),
    "set_full_optimizer_state": ("w", "exp_avg", X), "memory_report": (), "disk_report": (),
    "is_gradient_accumulation_boundary": (), "set_gradient_accumulation_boundary": (True,),
    "forward": (X,), "eval": (), "train": (),
    "offload_states": (), "reload_states": (), "empty_partition_cache": (),
    "train_batch": (X, X), "eval_batch": (X, X), "pipe_info": (), "set_stream": (None,),
}
PROPERTIES = ["rank", "world_size", "lr", "loss_scale", "loss_multiplier", "global_steps",
              "global_samples", "skipped_steps", "micro_steps"]


def test_the_tables_cover_the_public_api():
    public = {n for n, _ in inspect.getmembers(dsc.Engine) if not n.startswith("_")}
    covered = set(CALLS) | set(PROPERTIES) | {"close", "closed", "gathered", "config",
                                              "gradient_accumulation_steps", "train_batch_size",
                                              "train_micro_batch_size_per_gpu"}
    assert public <= covered, f"add to the closed-engine tables: {sorted(public - covered)}"


@pytest.mark.parametrize("method", sorted(CALLS))
def test_method_on_closed_engine(small_engine, method):
    small_engine.close()
    with pytest.raises(dsc.InvalidStateError) as ei:
        getattr(small_engine, method)(*CALLS[method])
    assert "after close()" in str(ei.value)


@pytest.mark.parametrize("prop", PROPERTIES)
def test_property_on_closed_engine(small_engine, prop):
    small_engine.close()
    with pytest.raises(dsc.InvalidStateError):
        getattr(small_engine, prop)
    if prop == "lr":
        with pytest.raises(dsc.InvalidStateError):
            small_engine.lr = 0.1


def test_close_is_idempotent_and_views_outlive_it(small_engine):
    v = small_engine.param("w")
    expect = small_engine.get_full_fp32_param("w")
    arr = v.numpy()
    small_engine.close()
    small_engine.close()
    assert small_engine.closed and repr(small_engine) == "Engine(closed)"
    # The engine's memory lives while a view or an array over it exists.
    np.testing.assert_array_equal(arr, expect)
    np.testing.assert_array_equal(v.numpy(), expect)


def test_context_manager_closes(adamw_config):
    with dsc.Engine(adamw_config) as e:
        assert not e.closed
    assert e.closed


def test_comm_closed():
    c = dsc.Comm.world()
    assert c.size == 1 and c.rank == 0 and c.backend in ("local", "mpi")
    c.close()
    with pytest.raises(dsc.InvalidStateError):
        c.rank
