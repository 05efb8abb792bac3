"""Minimal ctypes access to libdeepspeed_c for the Python-side tests.

Only what the tests need: DLTensor construction over numpy arrays and a few
engine calls. (The real Python binding is a separate deliverable.)
"""
import ctypes
import numpy as np


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class StepInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("stepped", ctypes.c_int32),
        ("skipped", ctypes.c_int32),
        ("loss_scale", ctypes.c_float),
        ("grad_norm", ctypes.c_double),
        ("lr", ctypes.c_double),
        ("global_step", ctypes.c_int64),
    ]


def tensor(arr):
    """A DLTensor over a C-contiguous float32 numpy array (keeps refs alive)."""
    assert arr.dtype == np.float32 and arr.flags["C_CONTIGUOUS"]
    shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
    t = DLTensor()
    t.data = arr.ctypes.data
    t.device = DLDevice(1, 0)
    t.ndim = arr.ndim
    t.dtype = DLDataType(2, 32, 1)
    t.shape = shape
    t.strides = None
    t.byte_offset = 0
    t._keep = (arr, shape)
    return t


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.ds_last_error.restype = ctypes.c_char_p

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed ({status}): {self.lib.ds_last_error().decode()}")

    def create(self, config_json):
        e = ctypes.c_void_p()
        self.check(self.lib.ds_engine_create(config_json.encode(), None, ctypes.byref(e)), "ds_engine_create")
        return e
