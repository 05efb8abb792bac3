"""Where the files of a DeepSpeed checkpoint are.

DeepSpeed's layout (facts from its engine's save path):

    <dir>/latest                                         the newest tag (text)
    <dir>/<tag>/mp_rank_00_model_states.pt               module weights, counters,
                                                         scheduler, client state; at
                                                         ZeRO 0 also the optimizer
    <dir>/<tag>/[bf16_]zero_pp_rank_<r>_mp_rank_00_optim_states.pt
                                                         ZeRO 1/2 (and bf16 without
                                                         ZeRO partitioning): rank r's
                                                         partition of the fp32 master
                                                         and optimizer state
    <dir>/<tag>/zero_pp_rank_<r>_mp_rank_00_model_states.pt   ZeRO-3: per rank (rank 0's
                                                         plays the part of the
                                                         model states file; the
                                                         others add their frozen
                                                         parameters' fragments)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import List, Optional

from .errors import ConvertError, UnsupportedCheckpointError

MODEL_FILE = "mp_rank_00_model_states.pt"
_OPTIM_RE = re.compile(r"^(?:bf16_|fp16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$")
_ZERO3_MODEL_RE = re.compile(r"^zero_pp_rank_(\d+)_mp_rank_(\d+)_model_states\.pt$")
_MP_MODEL_RE = re.compile(r"^mp_rank_(\d+)_model_states\.pt$")


@dataclass
class DsFiles:
    tag: str
    tag_dir: str
    model_file: str
    optim_files: List[str] = field(default_factory=list)  # index = data-parallel rank
    zero3_model_files: List[str] = field(default_factory=list)  # ZeRO-3: every rank's model states


def _read_latest(ckpt_dir: str) -> Optional[str]:
    path = os.path.join(ckpt_dir, "latest")
    if not os.path.isfile(path):
        return None
    with open(path, "r", encoding="utf-8") as f:
        tag = f.read().strip()
    if not tag or "/" in tag or tag in (".", ".."):
        raise ConvertError(f"{path}: does not hold a tag name (read {tag!r})")
    return tag


def locate(ckpt_dir: str, tag: Optional[str]) -> DsFiles:
    """The files of tag `tag` (None: the one `latest` names) under `ckpt_dir`."""
    if not os.path.isdir(ckpt_dir):
        raise ConvertError(f"{ckpt_dir}: not a directory (expected a DeepSpeed checkpoint directory)")
    if tag is None:
        tag = _read_latest(ckpt_dir)
        if tag is None:
            # Also accept the tag directory itself.
            if os.path.isfile(os.path.join(ckpt_dir, MODEL_FILE)) or any(
                    _ZERO3_MODEL_RE.match(n) for n in os.listdir(ckpt_dir)):
                tag_dir = ckpt_dir
                tag = os.path.basename(os.path.normpath(ckpt_dir))
            else:
                raise ConvertError(f"{ckpt_dir}: no 'latest' file and no --tag given "
                                   f"(and the directory holds no {MODEL_FILE})")
        else:
            tag_dir = os.path.join(ckpt_dir, tag)
    else:
        tag_dir = os.path.join(ckpt_dir, tag)
    if not os.path.isdir(tag_dir):
        raise ConvertError(f"{tag_dir}: tag directory not found (tag {tag!r})")
    names = sorted(os.listdir(tag_dir))

    mp = sorted(int(m.group(1)) for m in map(_MP_MODEL_RE.match, names) if m)
    zero3 = {}
    for n in names:
        m = _ZERO3_MODEL_RE.match(n)
        if m:
            if int(m.group(2)) != 0:
                raise UnsupportedCheckpointError(f"{os.path.join(tag_dir, n)}: model-parallel checkpoint "
                                                 "(mp_rank != 00) is not supported")
            zero3[int(m.group(1))] = os.path.join(tag_dir, n)
    if zero3 and not mp:
        # ZeRO-3: every rank saves its own model states file.
        ranks = sorted(zero3)
        if ranks != list(range(len(ranks))):
            missing = sorted(set(range(ranks[-1] + 1)) - set(ranks))
            raise ConvertError(f"{tag_dir}: ZeRO-3 model states files of rank(s) {missing} are missing "
                               f"(found ranks {ranks})")
        files = locate_optim(tag_dir, names)
        return DsFiles(tag=tag, tag_dir=tag_dir, model_file=zero3[0], optim_files=files,
                       zero3_model_files=[zero3[r] for r in ranks])
    if not mp:
        raise ConvertError(f"{tag_dir}: {MODEL_FILE} not found (not a DeepSpeed checkpoint tag directory?)")
    if mp != [0]:
        raise UnsupportedCheckpointError(
            f"{tag_dir}: model-parallel checkpoint (mp_rank files {mp}): only mp_rank_00 "
            "(no tensor/pipeline parallelism) is supported")

    return DsFiles(tag=tag, tag_dir=tag_dir, model_file=os.path.join(tag_dir, MODEL_FILE),
                   optim_files=locate_optim(tag_dir, names))


def locate_optim(tag_dir: str, names: List[str]) -> List[str]:
    """The optimizer files of a tag directory, index = data-parallel rank."""
    optim = {}
    for n in names:
        m = _OPTIM_RE.match(n)
        if not m:
            continue
        if int(m.group(2)) != 0:
            raise UnsupportedCheckpointError(f"{os.path.join(tag_dir, n)}: model-parallel optimizer file "
                                             "(mp_rank != 00) is not supported")
        r = int(m.group(1))
        if r in optim:
            raise ConvertError(f"{tag_dir}: two optimizer files for rank {r}: {optim[r]} and {n}")
        optim[r] = n
    ranks = sorted(optim)
    if ranks and ranks != list(range(len(ranks))):
        missing = sorted(set(range(ranks[-1] + 1)) - set(ranks))
        raise ConvertError(f"{tag_dir}: optimizer files of rank(s) {missing} are missing "
                           f"(found ranks {ranks})")
    return [os.path.join(tag_dir, optim[r]) for r in ranks]
