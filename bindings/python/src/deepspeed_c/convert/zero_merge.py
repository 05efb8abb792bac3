"""Merging the per-rank partitions of a DeepSpeed ZeRO-1/2 (or bf16) optimizer.

Layout facts (from DeepSpeed's ZeRO-1/2 and bf16 optimizers): each parameter
group's trainable parameters are flattened in the order the model states
file lists them (`param_shapes[group]`), optionally with alignment padding
after each parameter but the last (`param_alignment_paddings[group]`), then
padded at the end to a multiple of the partition alignment, and cut into
`world` equal partitions, rank r holding the r-th. A rank saves its
partition of the fp32 master either whole or without the end padding, and
its optimizer state (the base optimizer's, one flat tensor per group) the
same way. Since the padding only ever sits at the end of the group,
concatenating the ranks' pieces in rank order reproduces the group's flat
vector up to at least its last parameter.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import ConvertError


def concat_ranks(pieces: Sequence[Any], needed: int, what: str, files: Sequence[str]) -> Any:
    """The group's flat vector from each rank's piece; `needed` elements must be there."""
    import torch

    for piece, f in zip(pieces, files):
        if not torch.is_tensor(piece) or piece.dim() != 1:
            raise ConvertError(f"{f}: {what} is not a 1-D tensor (got {type(piece).__name__}"
                               f"{'' if not torch.is_tensor(piece) else ' of shape ' + str(tuple(piece.shape))})")
    flat = torch.cat([p.reshape(-1) for p in pieces]) if len(pieces) > 1 else pieces[0].reshape(-1)
    if flat.numel() < needed:
        raise ConvertError(f"{what}: the ranks' partitions ({', '.join(files)}) hold {flat.numel()} elements "
                           f"but the parameters listed in param_shapes need {needed}")
    return flat


def group_layout(shapes: Dict[str, Any], paddings: Optional[Sequence[int]],
                 group: int, model_file: str) -> Tuple[List[Tuple[str, Tuple[int, ...], int]], int]:
    """[(name, shape, offset)] of a group's parameters and the elements they span."""
    names = list(shapes)
    if paddings is not None and len(paddings) != len(names):
        raise ConvertError(f"param_alignment_paddings[{group}] has {len(paddings)} entries but "
                           f"param_shapes[{group}] in {model_file} lists {len(names)} parameters")
    out = []
    offset = 0
    for i, name in enumerate(names):
        shape = tuple(int(d) for d in shapes[name])
        numel = 1
        for d in shape:
            numel *= d
        out.append((name, shape, offset))
        offset += numel
        if paddings is not None:
            offset += int(paddings[i])
    return out, offset


def split_group(flat: Any, layout: List[Tuple[str, Tuple[int, ...], int]]) -> Dict[str, Any]:
    """Each parameter's elements (1-D views) of a group's flat vector."""
    out = {}
    for name, shape, offset in layout:
        numel = 1
        for d in shape:
            numel *= d
        out[name] = flat.narrow(0, offset, numel)
    return out
