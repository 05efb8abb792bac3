"""Loads the SWIG module and checks that the library speaks the ABI it was built for."""
from __future__ import annotations

import types

from . import errors as _errors

try:
    from . import _lowlevel as _ext
    from . import lowlevel as _proxy
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "deepspeed_c: the compiled module deepspeed_c.lowlevel could not be loaded "
        f"({exc}). Install the package with `pip install ./bindings/python` from the "
        "repository (it builds and bundles libdeepspeed_c.so), or set DEEPSPEED_C_ROOT to an "
        "installed deepspeed_c prefix before installing."
    ) from exc


def _namespace() -> types.SimpleNamespace:
    """The SWIG module as one namespace: the proxy module's classes and
    constants, and the extension's own functions. SWIG's proxy wraps every
    function in a Python def; calling the extension directly saves that
    frame on every call."""
    ns = types.SimpleNamespace(**{k: v for k, v in vars(_proxy).items() if not k.startswith("__")})
    for name, fn in vars(_ext).items():
        if callable(fn) and name in vars(ns) and not isinstance(vars(ns)[name], type):
            setattr(ns, name, fn)
    return ns


ll = _namespace()


def _check_abi() -> None:
    built_for = int(ll.DS_ABI_VERSION)
    running = int(ll.ds_abi_version())
    if built_for != running:
        raise ImportError(
            f"deepspeed_c: ABI mismatch: the Python module was built against ABI {built_for} "
            f"(deepspeed_c.h {ll.DS_VERSION_MAJOR}.{ll.DS_VERSION_MINOR}.{ll.DS_VERSION_PATCH}) "
            f"but the loaded libdeepspeed_c has ABI {running} (version {ll.ds_version_string()}); "
            "reinstall the package against the library you want to use."
        )
    codes = {name: getattr(ll, "DS_ERR_" + name) for name in (
        "INVALID_ARGUMENT", "INVALID_HANDLE", "INVALID_STATE", "INVALID_CONFIG", "UNSUPPORTED",
        "NOT_FOUND", "OUT_OF_MEMORY", "DEVICE_OUT_OF_MEMORY", "DEVICE", "COMM", "TIMEOUT", "IO",
        "FORMAT", "ABI_MISMATCH", "INTERNAL")}
    for name, value in codes.items():
        if getattr(_errors, name) != value:  # pragma: no cover - a header change not mirrored
            raise ImportError(f"deepspeed_c: errors.{name} is {getattr(_errors, name)}, the header says {value}")


_check_abi()
ll.set_error_factory(_errors.error_for_status)
