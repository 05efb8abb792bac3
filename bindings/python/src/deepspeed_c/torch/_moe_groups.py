"""DeepSpeed's MoE parameter groups in ``model_parameters`` / optimizer groups.

DeepSpeed's ``split_params_into_different_moe_groups_for_optimizer`` tags
every group with ``"name"`` and puts the expert parameters (those with
``allreduce = False``, ``group_name = "ep_size_<ep>"``) into groups marked
``"moe": True``, with the same hyperparameters as the group they came from.
The tags set no hyperparameter, so they are accepted here. With one expert
group per rank (``ep_size_1``) or one rank, the expert groups train exactly as
the rest; a torch model's own experts sharded over several ranks would need
their gradients reduced over the expert-data-parallel group only, which the
adapter does not do, so that case is refused by name.
"""
from __future__ import annotations

from typing import Any, Iterable, List

import torch

from ._errors import unsupported

#: Keys of a param group that set no hyperparameter.
GROUP_TAGS = ("params", "name", "moe")


def expert_group_params(groups: Any) -> List[torch.Tensor]:
    """The tensors of the groups marked ``"moe": True``."""
    if groups is None or isinstance(groups, torch.Tensor):
        return []
    if isinstance(groups, dict):
        groups = [groups]
    out: List[torch.Tensor] = []
    for item in list(groups):
        if isinstance(item, dict) and item.get("moe"):
            params = item.get("params", [])
            out.extend([params] if isinstance(params, torch.Tensor) else list(params))
    return out


def refuse_sharded_experts(experts: Iterable[torch.Tensor], world_size: int, who: str) -> None:
    """UnsupportedError when expert groups of ep_size > 1 would train on several ranks."""
    sharded = sorted({str(getattr(p, "group_name", "")) for p in experts} - {"", "ep_size_1"})
    if sharded and world_size > 1:
        raise unsupported(f"{who}: the MoE param groups hold experts of {sharded}: expert "
                          "parallelism for a torch model's own MoE layers (expert gradients "
                          "reduced over the expert-data-parallel group only) is not built; "
                          "ep_size 1 works, and the built-in GPT's MoE layers have it "
                          "(docs/PIPELINE.md)")
