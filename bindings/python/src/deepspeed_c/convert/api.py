"""The converter's functions (the command line in `cli` calls these)."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, Optional, Sequence, Union

from . import ds_files, ds_reader, export, writer
from .errors import ConvertError

PathLike = Union[str, "os.PathLike[str]"]


def _stderr(prefix: str) -> Callable[[str], None]:
    def say(msg: str) -> None:
        print(f"{prefix}{msg}", file=sys.stderr, flush=True)
    return say


def _load_config(config: Union[None, PathLike, Dict[str, Any]], saved: Any, model_file: str) -> Dict[str, Any]:
    if isinstance(config, dict):
        return config
    if config is not None:
        path = os.fspath(config)
        try:
            with open(path, "r", encoding="utf-8") as f:
                cfg = json.load(f)
        except OSError as exc:
            raise ConvertError(f"{path}: cannot read the config: {exc.strerror}") from None
        except ValueError as exc:
            raise ConvertError(f"{path}: not valid JSON: {exc}") from None
        if not isinstance(cfg, dict):
            raise ConvertError(f"{path}: the config is not a JSON object")
        return cfg
    if isinstance(saved, dict):
        return saved
    if isinstance(saved, str) and os.path.isfile(saved):
        return _load_config(saved, None, model_file)
    raise ConvertError(f"{model_file}: key 'ds_config' holds no config dict ({type(saved).__name__}"
                       f"{': ' + saved if isinstance(saved, str) else ''}); give the run's config with --config")


def convert_deepspeed_checkpoint(ds_dir: PathLike, out_dir: PathLike, *, tag: Optional[str] = None,
                                 config: Union[None, PathLike, Dict[str, Any]] = None,
                                 out_tag: Optional[str] = None, drop_client_keys: Sequence[str] = (),
                                 progress: Optional[Callable[[str], None]] = None,
                                 warn: Optional[Callable[[str], None]] = None) -> str:
    """Convert DeepSpeed checkpoint `ds_dir` (tag `tag`, default: its `latest`)
    into a deepspeed_c checkpoint under `out_dir`; returns the new tag directory.

    `config`: the run's DeepSpeed config (dict or JSON file); default: the one
    DeepSpeed saved in the checkpoint. Raises ConvertError (or
    UnsupportedCheckpointError) naming the file or key at fault; on failure
    nothing is left in `out_dir`.
    """
    progress = progress or _stderr("convert: ")
    warn = warn or _stderr("convert: warning: ")
    files = ds_files.locate(os.fspath(ds_dir), tag)
    run = ds_reader.read(files, progress, tuple(drop_client_keys))
    if run.dropped_buffers:
        warn(f"module buffers are not parameters and are not converted: {', '.join(run.dropped_buffers[:8])}"
             f"{' ...' if len(run.dropped_buffers) > 8 else ''}")
    if run.aliases:
        warn("tied parameters are converted once, under the name that holds them: "
             + ", ".join(f"{a} -> {b}" for a, b in list(run.aliases.items())[:8]))
    cfg = _load_config(config, run.ds_config, files.model_file)
    return writer.write(run, os.fspath(out_dir), cfg, progress, warn, out_tag)


def export_state_dict(ckpt_dir: PathLike, out_path: PathLike, *, tag: Optional[str] = None, fp32: bool = False,
                      progress: Optional[Callable[[str], None]] = None) -> str:
    """Write the weights of deepspeed_c checkpoint `ckpt_dir` (tag `tag`,
    default: its `latest`) to `out_path`: a torch state_dict (`.pt`, `.pth`,
    `.bin`) or a safetensors file (`.safetensors`), in the working precision
    or, with `fp32=True`, the fp32 master weights. Returns `out_path`."""
    return export.export(os.fspath(ckpt_dir), os.fspath(out_path), tag, fp32, progress or _stderr("convert: "))
