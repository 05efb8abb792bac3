"""DeepSpeed's names for ``Engine.offload_states``: ``OffloadDeviceEnum`` and
``OffloadStateTypeEnum`` (deepspeed/runtime/zero/offload_config.py), and
their mapping onto the C flags (DS_OFFLOAD_*)."""
from __future__ import annotations

import enum
from typing import Any, Iterable, Optional

from ._native import ll


class OffloadDeviceEnum(str, enum.Enum):
    """Where Engine.offload_states moves states (DeepSpeed's OffloadDeviceEnum)."""
    none = "none"
    cpu = "cpu"
    nvme = "nvme"


class OffloadStateTypeEnum(str, enum.Enum):
    """The states Engine.offload_states can move (DeepSpeed's OffloadStateTypeEnum)."""
    optim_states = "optim_states"
    hp_params = "hp_params"
    lp_params = "lp_params"
    lp_grads = "lp_grads"
    contiguous_grad_buffer = "contiguous_grad_buffer"


_STATE_BITS = {
    "optim_states": ll.DS_OFFLOAD_OPTIM_STATES, "hp_params": ll.DS_OFFLOAD_HP_PARAMS,
    "lp_params": ll.DS_OFFLOAD_LP_PARAMS, "lp_grads": ll.DS_OFFLOAD_LP_GRADS,
    "contiguous_grad_buffer": ll.DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER,
}
_DEVICES = {"cpu": ll.DS_OFFLOAD_DEVICE_CPU, "nvme": ll.DS_OFFLOAD_DEVICE_NVME}


def state_bits(include: Optional[Iterable[Any]]) -> int:
    """``include`` (None = every state; OffloadStateTypeEnum members or their names) as DS_OFFLOAD_* bits."""
    if include is None:
        return 0
    if isinstance(include, (str, OffloadStateTypeEnum)):
        include = [include]
    bits = 0
    for s in include:
        name = s.value if isinstance(s, OffloadStateTypeEnum) else s
        if name not in _STATE_BITS:
            raise ValueError(f"offload_states: include: {s!r} is not one of {sorted(_STATE_BITS)}")
        bits |= _STATE_BITS[name]
    if bits == 0:
        raise ValueError("offload_states: include is empty (None offloads every state)")
    return bits


def device_code(device: Any) -> int:
    """``device`` (OffloadDeviceEnum or "cpu"/"nvme") as DS_OFFLOAD_DEVICE_*."""
    name = device.value if isinstance(device, OffloadDeviceEnum) else device
    if name not in _DEVICES:
        raise ValueError(f"offload_states: device: {device!r} is not 'cpu' or 'nvme'")
    return _DEVICES[name]
