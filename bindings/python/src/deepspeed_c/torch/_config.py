"""Reading a DeepSpeed config (dict, JSON text or file) into a dict, and the
few facts the torch adapter needs from it before the core engine exists
(the 16-bit dtype the module is cast to, the ZeRO stage).

The core ``deepspeed_c.Engine`` validates the config; this module only reads.
"""
from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, Optional, Union

import torch

ConfigLike = Union[Dict[str, Any], str, "os.PathLike[str]"]


def load_config(config: ConfigLike) -> Dict[str, Any]:
    """Return a private copy of ``config`` as a dict.

    ``config`` is a dict, JSON text (a ``str`` whose first non-blank
    character is ``{``), or the path of a JSON file (as ``deepspeed.initialize``
    accepts). Raises ``TypeError`` for another type, ``ValueError`` for JSON
    that is not an object, and ``OSError`` for a file that cannot be read.
    """
    if isinstance(config, dict):
        return copy.deepcopy(config)
    if isinstance(config, str) and config.lstrip().startswith("{"):
        parsed = json.loads(config)
        source = "config JSON text"
    elif isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        with open(path, "r", encoding="utf-8") as f:
            parsed = json.load(f)
        source = f"config file {path!r}"
    else:
        raise TypeError(
            f"config must be a dict, JSON text or a path, not {type(config).__name__}")
    if not isinstance(parsed, dict):
        raise ValueError(f"{source} must hold a JSON object, not {type(parsed).__name__}")
    return parsed


def _section_enabled(cfg: Dict[str, Any], key: str) -> bool:
    section = cfg.get(key)
    return isinstance(section, dict) and section.get("enabled") is True


def half_dtype(cfg: Dict[str, Any]) -> Optional[torch.dtype]:
    """The 16-bit dtype the module's parameters become: ``torch.float16`` when
    ``fp16.enabled``, ``torch.bfloat16`` when ``bf16.enabled`` (or its alias
    ``bfloat16``), else None (fp32 training)."""
    if _section_enabled(cfg, "fp16"):
        return torch.float16
    if _section_enabled(cfg, "bf16") or _section_enabled(cfg, "bfloat16"):
        return torch.bfloat16
    return None


def zero_stage(cfg: Dict[str, Any]) -> int:
    """``zero_optimization.stage`` (0 when absent)."""
    zero = cfg.get("zero_optimization")
    if isinstance(zero, dict):
        stage = zero.get("stage", 0)
        if isinstance(stage, int):
            return stage
    return 0


def optimizer_type(cfg: Dict[str, Any]) -> str:
    """``optimizer.type`` lower-cased ("" when there is none)."""
    opt = cfg.get("optimizer")
    if isinstance(opt, dict) and isinstance(opt.get("type"), str):
        return opt["type"].lower()
    return ""


def optimizer_params(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """``optimizer.params`` (an empty dict when absent)."""
    opt = cfg.get("optimizer")
    if isinstance(opt, dict) and isinstance(opt.get("params"), dict):
        return dict(opt["params"])
    return {}


def state_keys(cfg: Dict[str, Any]) -> tuple:
    """The per-parameter optimizer state keys of the configured optimizer, as
    ``safe_get_full_optimizer_state`` names them."""
    kind = optimizer_type(cfg)
    if kind in ("adam", "adamw", "lamb", "onebitadam", "zerooneadam", "onebitlamb"):
        return ("exp_avg", "exp_avg_sq")
    if kind == "lion":
        return ("exp_avg",)
    if kind == "sgd":
        return ("momentum_buffer",)
    return ()
