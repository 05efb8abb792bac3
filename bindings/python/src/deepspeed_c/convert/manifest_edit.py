"""Editing the non-tensor state of a deepspeed_c checkpoint's manifest.json.

The library's API cannot set the counters, the optimizer step, the
schedule index or the loss scaler, so the converter saves a checkpoint with
the library and then rewrites those keys of its manifest (docs/CHECKPOINTS.md:
the last key, `manifest_crc32c`, is the CRC32C of every byte before its
opening quote). The data files are the library's, untouched, so only the
manifest (small: no tensor data) is checksummed here, in pure Python.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List

SEAL_KEY = "manifest_crc32c"


def _table() -> List[int]:
    poly = 0x82F63B78  # Castagnoli, reflected
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        out.append(c)
    return out


_TABLE = _table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C (init and final XOR 0xFFFFFFFF), continuing from `crc`."""
    c = crc ^ 0xFFFFFFFF
    t = _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def read(path: str) -> Dict[str, Any]:
    """The manifest's keys (checked against its seal)."""
    with open(path, "rb") as f:
        text = f.read()
    pos = text.rfind(b'"' + SEAL_KEY.encode() + b'"')
    if pos < 0:
        raise ValueError(f"{path}: key '{SEAL_KEY}' is missing (not a deepspeed_c manifest)")
    doc = json.loads(text.decode("utf-8"))
    if crc32c(text[:pos]) != doc.get(SEAL_KEY):
        raise ValueError(f"{path}: its CRC32C does not match '{SEAL_KEY}' (the file is corrupt)")
    return doc


def dumps(doc: Dict[str, Any]) -> bytes:
    """The manifest text with a fresh seal as its last key."""
    body = {k: v for k, v in doc.items() if k != SEAL_KEY}
    text = json.dumps(body, indent=2, ensure_ascii=False, allow_nan=False)
    head = (text[:text.rindex("}")].rstrip() + ",\n  ").encode("utf-8")
    return head + f'"{SEAL_KEY}": {crc32c(head)}\n}}\n'.encode("ascii")


def write(path: str, doc: Dict[str, Any]) -> None:
    """Replace the manifest at `path` atomically (temporary file, fsync, rename)."""
    data = dumps(doc)
    tmp = path + ".convert-tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
