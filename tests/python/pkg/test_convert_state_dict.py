"""python -m deepspeed_c.convert --to-state-dict: a deepspeed_c checkpoint ->
a torch state_dict (.pt) or safetensors file, working precision or fp32.

The expected values are read from the engine that saved the checkpoint
(its weights views and get_full_fp32_param), and safetensors files are
parsed here by hand, so the exporter is checked against neither itself nor
its own writer.
"""
import contextlib
import io
import json
import os
import struct
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dsc = pytest.importorskip("deepspeed_c")

CFG = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
       "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "zero_optimization": {"stage": 2}}
SHAPES = {"a.weight": (4, 3), "a.bias": (4,), "frozen": (2, 2), "b.weight": (3, 4)}


def _export(src, dst, *extra):
    """The command line, run in this process (as `python -m deepspeed_c.convert ...`)."""
    from deepspeed_c.convert.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--to-state-dict", str(src), str(dst), *extra])
    return types.SimpleNamespace(returncode=code, stderr=err.getvalue())


@pytest.fixture()
def trained(tmp_path):
    """A bf16 checkpoint after two steps, and the engine's own weights then."""
    rng = np.random.default_rng(0)
    with dsc.Engine(CFG) as e:
        for n, s in SHAPES.items():
            e.add_param(n, rng.standard_normal(s).astype(np.float32), trainable=n != "frozen")
        e.init()
        for _ in range(2):
            for n, s in SHAPES.items():
                if n != "frozen":
                    e.accumulate_grad(n, rng.standard_normal(s).astype(np.float32))
            e.backward()
            e.step()
        e.save_checkpoint(str(tmp_path / "ckpt"))
        working = {n: torch.from_dlpack(e.param(n)).reshape(s).clone() for n, s in SHAPES.items()}
        master = {n: e.get_full_fp32_param(n) for n in SHAPES if n != "frozen"}
    master["frozen"] = working["frozen"].float().numpy()
    return tmp_path / "ckpt", working, master


def _read_safetensors(path):
    """name -> (dtype, shape, raw bytes), parsed per the safetensors format."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    assert header.pop("__metadata__") == {"format": "pt"}
    body = data[8 + n:]
    ends = sorted(v["data_offsets"] for v in header.values())
    assert ends[0][0] == 0 and ends[-1][1] == len(body)
    return {k: (v["dtype"], tuple(v["shape"]), body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def test_pt_working_precision(trained, tmp_path):
    ckpt, working, _ = trained
    r = _export(ckpt, tmp_path / "model.pt")
    assert r.returncode == 0, r.stderr
    sd = torch.load(tmp_path / "model.pt")
    assert list(sd) == list(SHAPES)  # registration order
    for n, w in working.items():
        assert sd[n].dtype == torch.bfloat16 and torch.equal(sd[n], w), n


def test_pt_fp32_master(trained, tmp_path):
    ckpt, _, master = trained
    r = _export(ckpt, tmp_path / "model.pt", "--fp32")
    assert r.returncode == 0, r.stderr
    sd = torch.load(tmp_path / "model.pt")
    for n, m in master.items():
        assert sd[n].dtype == torch.float32
        np.testing.assert_array_equal(sd[n].numpy(), m, err_msg=n)


def test_safetensors_both_precisions(trained, tmp_path):
    ckpt, working, master = trained
    assert _export(ckpt, tmp_path / "w.safetensors").returncode == 0
    for n, (dtype, shape, raw) in _read_safetensors(tmp_path / "w.safetensors").items():
        assert dtype == "BF16" and shape == SHAPES[n]
        assert raw == working[n].view(torch.int16).numpy().tobytes(), n
    r = _export(ckpt, tmp_path / "m.safetensors", "--fp32", "--tag", "global_step2")
    assert r.returncode == 0, r.stderr
    for n, (dtype, shape, raw) in _read_safetensors(tmp_path / "m.safetensors").items():
        assert dtype == "F32" and shape == SHAPES[n]
        np.testing.assert_array_equal(np.frombuffer(raw, np.float32).reshape(shape), master[n], err_msg=n)


def test_deepspeed_to_state_dict_round_trip(tmp_path):
    """DeepSpeed layout -> deepspeed_c -> fp32 state_dict gives the DeepSpeed run's fp32 master."""
    from test_convert_deepspeed import SHAPES as DS_SHAPES, LossScaler, Run, _config, write_zero12

    run = Run(DS_SHAPES, "bf16", seed=21)
    write_zero12(tmp_path / "ds", run, _config(2, "bf16"), 2, [list(run.shapes)], 2, LossScaler(1.0), 8)
    from test_convert_deepspeed import _convert

    conv = _convert(tmp_path / "ds", tmp_path / "dsc")
    assert conv.returncode == 0, conv.stderr
    assert _export(tmp_path / "dsc", tmp_path / "fp32.pt", "--fp32").returncode == 0
    sd = torch.load(tmp_path / "fp32.pt")
    for n in run.shapes:
        np.testing.assert_array_equal(sd[n].numpy(), run.master[n], err_msg=n)
    assert _export(tmp_path / "dsc", tmp_path / "bf16.pt").returncode == 0
    sd = torch.load(tmp_path / "bf16.pt")
    for n in run.shapes:
        assert torch.equal(sd[n], run.working(n)), n


def test_refusals_leave_nothing(trained, tmp_path):
    ckpt, _, _ = trained
    tag_dir = ckpt / "global_step2"
    r = _export(ckpt, tag_dir / "x.pt")
    assert r.returncode == 1 and "refusing to write into the checkpoint" in r.stderr
    r = _export(ckpt, tmp_path / "x.npz")
    assert r.returncode == 1 and ".safetensors" in r.stderr
    r = _export(ckpt, tmp_path / "x.pt", "--tag", "nope")
    assert r.returncode == 1 and "nope" in r.stderr
    # A corrupt data file: the library's CRC check names it; no output is left.
    optim = tag_dir / "optim_rank0.safetensors"
    data = bytearray(optim.read_bytes())
    data[-1] ^= 0xFF
    optim.write_bytes(bytes(data))
    r = _export(ckpt, tmp_path / "x.pt", "--fp32")
    assert r.returncode == 1 and "optim_rank0.safetensors" in r.stderr, r.stderr
    assert not [p for p in os.listdir(tmp_path) if p.startswith("x.pt")]
