"""Exceptions raised for the library's status codes.

Every ``ds_*`` call that fails raises a :class:`DeepSpeedError` (or a
subclass chosen by the status) whose message is the library's own text: it
names the bad key, argument, parameter, file or rank.
"""
from __future__ import annotations

from typing import Dict, Type

# The status codes of include/deepspeed_c.h (in deepspeed_c/base.h; checked
# against the compiled module at import: deepspeed_c._native).
OK = 0
INVALID_ARGUMENT = 1
INVALID_HANDLE = 2
INVALID_STATE = 3
INVALID_CONFIG = 4
UNSUPPORTED = 5
NOT_FOUND = 6
OUT_OF_MEMORY = 7
DEVICE_OUT_OF_MEMORY = 8
DEVICE = 9
COMM = 10
TIMEOUT = 11
IO = 12
FORMAT = 13
ABI_MISMATCH = 14
INTERNAL = 15


class DeepSpeedError(Exception):
    """A failed library call: ``status`` is the ``DS_ERR_*`` code, ``message`` the library's text."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, message={self.message!r})"

    def __reduce__(self):  # picklable (multiprocessing, pytest-xdist)
        return (type(self), (self.status, self.message))


class InvalidArgumentError(DeepSpeedError, ValueError):
    """DS_ERR_INVALID_ARGUMENT: a bad argument (NULL, a bad tensor field, a bad value)."""


class InvalidStateError(DeepSpeedError):
    """DS_ERR_INVALID_STATE or DS_ERR_INVALID_HANDLE: a call out of order, or on a closed engine."""


class ConfigError(DeepSpeedError, ValueError):
    """DS_ERR_INVALID_CONFIG: the config names the bad key by its dotted path (and a suggestion)."""


class UnsupportedError(DeepSpeedError, NotImplementedError):
    """DS_ERR_UNSUPPORTED: a DeepSpeed feature this library does not implement."""


class NotFoundError(DeepSpeedError, KeyError):
    """DS_ERR_NOT_FOUND: a parameter, tag, file or optimizer state key that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class DeepSpeedMemoryError(DeepSpeedError, MemoryError):
    """DS_ERR_OUT_OF_MEMORY / DS_ERR_DEVICE_OUT_OF_MEMORY."""


class DeviceError(DeepSpeedError):
    """DS_ERR_DEVICE: a CUDA error."""


class CommError(DeepSpeedError):
    """DS_ERR_COMM: a collective failed (a peer died, the communicator was aborted)."""


class DeepSpeedTimeout(DeepSpeedError, TimeoutError):
    """DS_ERR_TIMEOUT: a collective or wait expired."""


class CheckpointError(DeepSpeedError):
    """DS_ERR_IO / DS_ERR_FORMAT: a file could not be read or written, or is corrupt or of another model."""


class AbiMismatchError(DeepSpeedError):
    """DS_ERR_ABI_MISMATCH: a struct size or version the library does not understand."""


class InternalError(DeepSpeedError):
    """DS_ERR_INTERNAL: a bug in deepspeed_c."""


STATUS_CLASSES: Dict[int, Type[DeepSpeedError]] = {
    INVALID_ARGUMENT: InvalidArgumentError,
    INVALID_HANDLE: InvalidStateError,
    INVALID_STATE: InvalidStateError,
    INVALID_CONFIG: ConfigError,
    UNSUPPORTED: UnsupportedError,
    NOT_FOUND: NotFoundError,
    OUT_OF_MEMORY: DeepSpeedMemoryError,
    DEVICE_OUT_OF_MEMORY: DeepSpeedMemoryError,
    DEVICE: DeviceError,
    COMM: CommError,
    TIMEOUT: DeepSpeedTimeout,
    IO: CheckpointError,
    FORMAT: CheckpointError,
    ABI_MISMATCH: AbiMismatchError,
    INTERNAL: InternalError,
}


def error_for_status(status: int, message: str) -> DeepSpeedError:
    """The exception for a status (unknown codes give the base class)."""
    return STATUS_CLASSES.get(status, DeepSpeedError)(status, message)
