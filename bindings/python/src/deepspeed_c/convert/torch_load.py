"""torch.load for DeepSpeed checkpoints without DeepSpeed installed.

DeepSpeed pickles some of its own objects into checkpoints (the loss
scaler, the ZeRO stage enum, config objects). Unpickling those needs their
classes; where a class cannot be imported, a placeholder records the
pickled arguments and state so the converter can read their attributes.
"""
from __future__ import annotations

import inspect
import os
import pickle
import threading
import types
from typing import Any, Dict, Optional, Tuple


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str) -> Any:
        # Enum members pickle as getattr(EnumClass, "member") (Python >= 3.11).
        if name.startswith("__"):
            raise AttributeError(name)
        obj = object.__new__(cls)
        obj.__dict__["_ds_args"] = ()
        obj.__dict__["_ds_member"] = name
        return obj


class Placeholder(metaclass=_PlaceholderMeta):
    """Stands in for an object whose class could not be imported."""

    _ds_module = ""
    _ds_name = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> "Placeholder":
        obj = object.__new__(cls)
        obj.__dict__["_ds_args"] = args
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = dict(state[0] or {}, **state[1])  # (dict, slots) form
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.__dict__["_ds_state"] = state

    def __repr__(self) -> str:
        return f"<placeholder for {self._ds_module}.{self._ds_name}>"


_placeholders: Dict[Tuple[str, str], type] = {}


def _placeholder(module: str, name: str) -> type:
    key = (module, name)
    if key not in _placeholders:
        _placeholders[key] = type(name, (Placeholder,), {"_ds_module": module, "_ds_name": name,
                                                          "__module__": __name__})
    return _placeholders[key]


class _TolerantUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            # Only foreign objects become placeholders; torch's own types must resolve.
            if module.split(".")[0] in ("torch", "numpy", "collections", "builtins", "copyreg"):
                raise
            return _placeholder(module, name)


def _load(file: Any, **kwargs: Any) -> Any:
    return _TolerantUnpickler(file, **kwargs).load()


tolerant_pickle = types.ModuleType("deepspeed_c_tolerant_pickle")
tolerant_pickle.Unpickler = _TolerantUnpickler  # type: ignore[attr-defined]
tolerant_pickle.load = _load  # type: ignore[attr-defined]
tolerant_pickle.__dict__["HIGHEST_PROTOCOL"] = pickle.HIGHEST_PROTOCOL


_patch_lock = threading.Lock()


def _torch_load(path: str) -> Any:
    import torch

    params = inspect.signature(torch.load).parameters
    kwargs: Dict[str, Any] = {"map_location": "cpu"}
    if "weights_only" in params:
        kwargs["weights_only"] = False  # the files hold DeepSpeed's objects, not only tensors
    if int(torch.__version__.split(".")[0]) >= 2:
        if "mmap" in params:
            # Memory-mapped: a big file's tensors are not all read into memory at once.
            try:
                return torch.load(path, pickle_module=tolerant_pickle, mmap=True, **kwargs)
            except RuntimeError as exc:
                if "mmap" not in str(exc):  # only the legacy (non-zip) format cannot be mapped
                    raise
        return torch.load(path, pickle_module=tolerant_pickle, **kwargs)
    # torch 1.x replaces a given pickle_module by `pickle` when weights_only is
    # False, so the tolerant unpickler is swapped in for the call instead.
    with _patch_lock:
        saved = pickle.Unpickler
        pickle.Unpickler = _TolerantUnpickler  # type: ignore[misc]
        try:
            return torch.load(path, **kwargs)
        finally:
            pickle.Unpickler = saved  # type: ignore[misc]


def load_pt(path: str) -> Any:
    """torch.load(path) on the CPU with foreign classes replaced by placeholders."""
    from .errors import ConvertError

    try:
        return _torch_load(path)
    except FileNotFoundError:
        raise ConvertError(f"{path}: file not found") from None
    except Exception as exc:  # torch raises many types for a corrupt file
        size = os.path.getsize(path) if os.path.exists(path) else -1
        raise ConvertError(f"{path}: cannot be read by torch.load ({size} bytes): "
                           f"{type(exc).__name__}: {exc}") from exc


def attr(obj: Any, name: str, default: Any = None) -> Any:
    """An attribute of a loaded object or placeholder, or a dict key."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def enum_int(value: Any, names: Optional[Dict[str, int]] = None) -> Any:
    """The integer of a pickled IntEnum (real or placeholder; `names` maps member
    names to values for enums pickled by name), else value unchanged."""
    if isinstance(value, Placeholder):
        member = value.__dict__.get("_ds_member")
        if member is not None:
            return (names or {}).get(member, member)
        if value._ds_args:
            return value._ds_args[0]
    try:
        return int(value)
    except (TypeError, ValueError):
        return value
