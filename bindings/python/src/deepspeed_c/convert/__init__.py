"""Checkpoint conversion between DeepSpeed and deepspeed_c.

`python -m deepspeed_c.convert DS_CHECKPOINT_DIR OUT_DIR` turns a DeepSpeed
checkpoint (ZeRO 0-3, fp32/fp16/bf16, any number of data-parallel ranks)
into this library's format; `python -m deepspeed_c.convert --to-state-dict
CKPT_DIR OUT.pt|OUT.safetensors` exports a deepspeed_c checkpoint's weights.
See docs/PYTHON.md, "Converting checkpoints".
"""
from __future__ import annotations

from .api import convert_deepspeed_checkpoint, export_state_dict
from .errors import ConvertError, UnsupportedCheckpointError

__all__ = ["convert_deepspeed_checkpoint", "export_state_dict", "ConvertError", "UnsupportedCheckpointError"]
