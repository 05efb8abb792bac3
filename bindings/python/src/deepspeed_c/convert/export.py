"""A deepspeed_c checkpoint -> a torch state_dict (`.pt`) or a safetensors file.

The checkpoint is loaded by the library itself into a one-rank engine built
from the config saved in its manifest (so every file is verified exactly as
`Engine.load_checkpoint` verifies it, and fragments saved by any number of
ranks are gathered), then each parameter is read out: the working weights
(fp32, fp16 or bf16, what forward uses) or, with `fp32=True`, the fp32
master weights (frozen parameters widened from their working weights, as
DeepSpeed's zero_to_fp32 does).
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional

from . import manifest_edit
from .errors import ConvertError
from .writer import config_for_one_rank

_ST_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def _torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def resolve_tag(ckpt_dir: str, tag: Optional[str]) -> str:
    if not os.path.isdir(ckpt_dir):
        raise ConvertError(f"{ckpt_dir}: not a directory (expected a deepspeed_c checkpoint directory)")
    if tag is None:
        latest = os.path.join(ckpt_dir, "latest")
        if not os.path.isfile(latest):
            raise ConvertError(f"{ckpt_dir}: no 'latest' file and no --tag given")
        with open(latest, "r", encoding="utf-8") as f:
            tag = f.read().rstrip()
    manifest = os.path.join(ckpt_dir, tag, "manifest.json")
    if not os.path.isfile(manifest):
        raise ConvertError(f"{manifest}: not found (tag {tag!r} is not a committed deepspeed_c checkpoint)")
    return tag


def _check_output(out_path: str, ckpt_dir: str, tag: str) -> str:
    ext = os.path.splitext(out_path)[1].lower()
    if ext not in (".pt", ".pth", ".bin", ".safetensors"):
        raise ConvertError(f"{out_path}: the output must end in .pt, .pth, .bin (torch.save) or .safetensors")
    if os.path.isdir(out_path):
        raise ConvertError(f"{out_path}: is a directory")
    out_dir = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(out_dir):
        raise ConvertError(f"{out_dir}: the output's directory does not exist")
    tag_dir = os.path.realpath(os.path.join(ckpt_dir, tag))
    if os.path.realpath(out_dir) == tag_dir or os.path.realpath(out_path) == os.path.realpath(
            os.path.join(ckpt_dir, "latest")):
        raise ConvertError(f"{out_path}: refusing to write into the checkpoint being read ({tag_dir})")
    return ext


def write_safetensors(path: str, tensors: "OrderedDict[str, Any]", metadata: Dict[str, str]) -> None:
    """A safetensors file of torch tensors (F32, F16, BF16), in the given order."""
    import torch

    codes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    header: Dict[str, Any] = {"__metadata__": metadata}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        if t.dtype not in codes:
            raise ConvertError(f"tensor '{name}' has dtype {t.dtype}, which this writer does not handle")
        t = t.detach().contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
        f.flush()
        os.fsync(f.fileno())


def _read_tensors(ckpt_dir: str, tag: str, fp32: bool, progress: Callable[[str], None]) -> "OrderedDict[str, Any]":
    import numpy as np
    import torch

    import deepspeed_c as dsc

    try:
        manifest = manifest_edit.read(os.path.join(ckpt_dir, tag, "manifest.json"))
    except (ValueError, KeyError) as exc:
        raise ConvertError(str(exc)) from exc
    params = manifest["params"]
    if fp32 and manifest.get("optimizer") is None:
        raise ConvertError(f"{ckpt_dir}/{tag}: the checkpoint has no optimizer state, so no fp32 master "
                           "weights (drop --fp32 to export the working weights)")
    cfg = config_for_one_rank(manifest["config"], int(manifest["world_size"]))
    cfg.pop("ignored", None)
    out: "OrderedDict[str, Any]" = OrderedDict()
    load_dir, view_dir = ckpt_dir, None
    if fp32 and manifest.get("rng_states"):
        # A built-in model's checkpoint records its dropout stream, which an
        # engine without that model refuses to load together with the
        # optimizer state (docs/CHECKPOINTS.md, "rng_states"). The engine
        # reads a view instead: the same data files, linked (and verified
        # against the manifest's sizes and CRC32C as ever), under a manifest
        # lacking only the stream.
        view_dir = tempfile.mkdtemp(prefix="deepspeed_c-export-")
        os.makedirs(os.path.join(view_dir, tag))
        for name in manifest["files"]:
            os.symlink(os.path.abspath(os.path.join(ckpt_dir, tag, name)), os.path.join(view_dir, tag, name))
        manifest_edit.write(os.path.join(view_dir, tag, "manifest.json"), dict(manifest, rng_states=[]))
        load_dir = view_dir
    try:
        with dsc.Engine(cfg) as eng:
            for name, p in params.items():
                dtype = _torch_dtype(_ST_DTYPES.get(p["dtype"], "float32"))
                eng.add_param(name, torch.zeros(tuple(p["shape"]), dtype=dtype), trainable=bool(p["trainable"]))
            eng.init()
            progress(f"loading {ckpt_dir}/{tag} ({len(params)} parameters)")
            eng.load_checkpoint(load_dir, tag, load_optimizer_states=fp32, load_lr_scheduler_states=False,
                                load_module_only=not fp32)
            for name, p in params.items():
                if fp32 and p["trainable"] and int(np.prod(p["shape"], dtype=np.int64)) > 0:
                    out[name] = torch.from_numpy(np.array(eng.get_full_fp32_param(name), dtype=np.float32))
                    continue
                view = np.array(eng.param(name).numpy())  # a copy: the engine closes below
                if p["dtype"] == "BF16":  # bf16 comes as uint16 bits; torch 1.13 has no uint16
                    t = torch.from_numpy(view.view(np.int16)).view(torch.bfloat16)
                else:
                    t = torch.from_numpy(view)
                out[name] = t.float() if fp32 else t
                out[name] = out[name].reshape(tuple(p["shape"]))
    except dsc.DeepSpeedError as exc:
        raise ConvertError(str(exc)) from exc
    finally:
        if view_dir is not None:
            shutil.rmtree(view_dir, ignore_errors=True)
    return out


def export(ckpt_dir: str, out_path: str, tag: Optional[str] = None, fp32: bool = False,
           progress: Callable[[str], None] = lambda s: None) -> str:
    """Write the checkpoint's weights as a state_dict; returns out_path."""
    tag = resolve_tag(ckpt_dir, tag)
    ext = _check_output(out_path, ckpt_dir, tag)
    tensors = _read_tensors(ckpt_dir, tag, fp32, progress)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out_path) + ".convert-tmp-", dir=out_dir)
    os.close(fd)
    try:
        progress(f"writing {out_path}")
        if ext == ".safetensors":
            write_safetensors(tmp, tensors, {"format": "pt"})
        else:
            import torch

            torch.save(tensors, tmp)
        os.replace(tmp, out_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out_path
