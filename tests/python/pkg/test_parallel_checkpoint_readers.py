"""Checkpoints of a pipeline (two stages) and of a tensor-parallel pair
(autotp_size 2), each saved on two ranks by workers/parallel_ckpt_worker.py,
describe the whole model (docs/CHECKPOINTS.md, "Pipeline, tensor- and
expert-parallel engines"), so the readers written for one process read them
unchanged: `python -m deepspeed_c.convert --to-state-dict` exports every
parameter with its logical shape, bitwise the model file's working weights
and (--fp32) the optimizer files' masters, both parsed here by hand; and a
one-process engine of the unsplit GPT loads the checkpoint and holds those
same weights."""
from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import types

import numpy as np
import pytest

dsc = pytest.importorskip("deepspeed_c")
pytest.importorskip("torch")


def _read_safetensors(path):
    """name -> (dtype, shape, raw bytes), parsed per the safetensors format."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], tuple(v["shape"]), body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def _export(src, dst, *extra):
    from deepspeed_c.convert.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--to-state-dict", str(src), str(dst), *extra])
    return types.SimpleNamespace(returncode=code, stderr=err.getvalue())


@pytest.mark.parametrize("layout", ["pipe", "tp"])
def test_readers_of_one_process_read_a_sharded_checkpoint(layout, tmp_path):
    import multirank_helpers as H
    import pipe_engine_data as D
    why = H.mpi_available()
    if why:
        pytest.skip(why)
    ckpt = tmp_path / "ckpt"
    H.run_ranks("parallel_ckpt_worker.py", ["--layout", layout, "--out", str(ckpt)], ranks=2)
    tag = ckpt / "global_step2"
    manifest = json.load(open(tag / "manifest.json"))
    assert manifest["world_size"] == 2
    model = _read_safetensors(tag / "model.safetensors")
    C = D.SPEC["n_embd"]
    assert model["h.0.attn.c_attn.weight"][1] == (3 * C, C)   # whole, not a stage's or a shard's
    assert model["h.0.mlp.c_proj.weight"][1] == (C, 4 * C)
    assert list(model) == list(manifest["params"])
    masters = {}
    for name in manifest["partition"]:
        for key, (dtype, shape, raw) in _read_safetensors(tag / name).items():
            param, offset, what = key.rsplit("/", 2)
            if what == "master":
                assert offset == "0" and shape == (int(np.prod(model[param][1])),)  # one whole fragment
                masters[param] = raw
    assert set(masters) == set(model)   # every parameter is trainable here, its state written once

    assert _export(ckpt, tmp_path / "w.safetensors").returncode == 0
    for name, (dtype, shape, raw) in _read_safetensors(tmp_path / "w.safetensors").items():
        assert (dtype, shape, raw) == model[name], name
    assert _export(ckpt, tmp_path / "m.safetensors", "--fp32").returncode == 0
    exported = _read_safetensors(tmp_path / "m.safetensors")
    assert set(exported) == set(model)
    for name, (dtype, shape, raw) in exported.items():
        assert dtype == "F32" and shape == model[name][1] and raw == masters[name], name

    with dsc.Engine(D.CONFIG, model=dsc.Model(D.SPEC)) as e:
        e.load_checkpoint(str(ckpt))
        assert e.global_steps == D.STEPS
        for name, (dtype, shape, raw) in model.items():
            view = np.array(e.param(name).numpy())
            assert view.shape == shape and view.tobytes() == raw, name
