"""deepspeed_c: DeepSpeed's training runtime as a C library, from Python.

``deepspeed_c.Engine`` drives the engine directly (numpy, JAX, frameworks);
``deepspeed_c.torch.initialize`` is a drop-in for ``deepspeed.initialize``.
See bindings/python/README.md.
"""
from __future__ import annotations

import json as _json
from typing import Any, Dict

from ._native import ll as _ll
from . import _logging
from ._logging import LOG_DEBUG, LOG_ERROR, LOG_INFO, LOG_OFF, LOG_WARN
from .comm import Comm
from .engine import Engine, ParamInfo, PipeInfo, StepInfo
from .model import Model
from .offload import OffloadDeviceEnum, OffloadStateTypeEnum
from .pipe import (DataParallelSchedule, InferenceSchedule, PipeDataParallelTopology, PipeInstr,
                   PipeModelDataParallelTopology, PipeSchedule, ProcessTopology, Topology, TrainSchedule,
                   pipe_recv, pipe_send)
from .errors import (AbiMismatchError, CheckpointError, CommError, ConfigError, DeepSpeedError,
                     DeepSpeedMemoryError, DeepSpeedTimeout, DeviceError, InternalError,
                     InvalidArgumentError, InvalidStateError, NotFoundError, UnsupportedError)
from .view import View

__version__: str = _ll.ds_version_string()


def abi_version() -> int:
    """The ABI of the loaded libdeepspeed_c (checked at import against the module's)."""
    return int(_ll.ds_abi_version())


def build_info() -> Dict[str, Any]:
    """The library's build and machine description (compiler, MPI, CUDA, SIMD level)."""
    return _json.loads(_ll.ds_build_info())


def convert(src: Any, dst: Any) -> None:
    """Convert the elements of ``src`` into the (writable) ``dst`` (fp32/fp16/bf16, same shape)."""
    from .engine import tensor_arg
    _ll.ds_convert(tensor_arg(src), dst)


__all__ = [
    "Engine", "Model", "StepInfo", "ParamInfo", "PipeInfo", "View", "Comm", "abi_version", "build_info", "convert",
    "OffloadDeviceEnum", "OffloadStateTypeEnum", "Topology", "ProcessTopology", "PipeDataParallelTopology",
    "PipeModelDataParallelTopology", "PipeSchedule", "PipeInstr", "TrainSchedule", "InferenceSchedule",
    "DataParallelSchedule", "pipe_send", "pipe_recv",
    "DeepSpeedError", "ConfigError", "NotFoundError", "InvalidArgumentError", "InvalidStateError",
    "CheckpointError", "CommError", "DeepSpeedTimeout", "UnsupportedError", "DeepSpeedMemoryError",
    "DeviceError", "AbiMismatchError", "InternalError",
    "LOG_OFF", "LOG_ERROR", "LOG_WARN", "LOG_INFO", "LOG_DEBUG",
]
