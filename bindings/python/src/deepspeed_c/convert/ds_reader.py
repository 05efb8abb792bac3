"""Reading a DeepSpeed checkpoint (ZeRO 0-3; fp32, fp16, bf16) into one
full, unpartitioned description of the run (`DsRun`).

What DeepSpeed keeps where (facts from its engine and optimizers):
* model states file: `module` (the working weights and buffers, by name),
  `buffer_names`, `param_shapes` (ZeRO: the optimizer's parameters per group,
  in flat order), `frozen_param_shapes`, `shared_params` (tied aliases),
  `lr_scheduler` (its state_dict), `global_steps`, `global_samples`,
  `skipped_steps`, `dp_world_size`, `ds_config`, `ds_version`; at ZeRO 0
  `optimizer` (the optimizer's state_dict); every other key is client state.
* ZeRO 0 optimizers: a plain torch optimizer (`state`, `param_groups`), or
  the fp16/bf16 wrappers with `optimizer_state_dict` and the fp32 master as
  `fp32_groups_flat` (one flat tensor per group) or `fp32_groups` (one tensor
  per parameter), plus `cur_scale`, `cur_iter`, `last_overflow_iter`.
* ZeRO 3: every rank saves `zero_pp_rank_<r>_mp_rank_00_model_states.pt`
  (rank 0's stands in for the model states file; `module` holds empty
  placeholders, `frozen_param_fragments` each rank's part of the frozen
  parameters) and an optimizer file with `fp32_flat_groups`.
* ZeRO 1/2 and the bf16 optimizer: one file per rank with
  `optimizer_state_dict` = {`single_partition_of_fp32_groups`,
  `base_optimizer_state`, `loss_scaler`, `partition_count`, ...}.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import zero_merge
from .ds_files import DsFiles
from .errors import ConvertError, UnsupportedCheckpointError
from .torch_load import Placeholder, attr, enum_int, load_pt

# Keys of the model states file that are DeepSpeed's own; the rest is client state.
_DS_MODEL_KEYS = frozenset({
    "module", "buffer_names", "optimizer", "param_shapes", "frozen_param_shapes", "shared_params",
    "frozen_param_fragments", "lr_scheduler", "data_sampler", "random_ltd", "sparse_tensor_module_names",
    "skipped_steps", "global_steps", "global_samples", "dp_world_size", "mp_world_size", "ds_config",
    "ds_version", "checkpoint_parallel_dimensions", "universal_checkpoint_info", "mp_rank",
})


@dataclass
class ParamState:
    name: str
    shape: Tuple[int, ...]
    working: Any                      # torch tensor from `module` (the working dtype)
    trainable: bool
    master: Optional[Any] = None      # 1-D fp32 torch tensor, numel elements
    states: Dict[str, Any] = field(default_factory=dict)  # optimizer state name -> 1-D tensor


@dataclass
class DsRun:
    files: DsFiles
    params: List[ParamState]
    dropped_buffers: List[str]
    aliases: Dict[str, str]           # tied alias -> the parameter that holds it
    zero_stage: int
    dp_world_size: int
    optimizer_step: Optional[int]     # applied optimizer steps (Adam's bias-correction t)
    lr: Optional[float]
    betas: Optional[Tuple[float, float]]
    scheduler_state: Optional[Dict[str, Any]]
    loss_scaler: Optional[Dict[str, Any]]
    global_steps: int
    global_samples: Optional[int]
    skipped_steps: int
    client_state: Dict[str, Any]
    ds_config: Any
    ds_version: Optional[str]


def _numel(shape: Tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _step_of(value: Any) -> Optional[int]:
    try:
        import torch
        if torch.is_tensor(value):
            return int(round(float(value.item())))
        return int(value)
    except (TypeError, ValueError):
        return None


class _Reader:
    def __init__(self, files: DsFiles, progress: Callable[[str], None]):
        self.files = files
        self.progress = progress
        self.steps: List[Tuple[int, str]] = []  # (step, where) of each parameter's optimizer state
        self.group_steps: List[int] = []        # param_groups[g]['step'] (FusedAdam's)
        self.group_warnings: set = set()
        self.lr: Optional[float] = None
        self.betas: Optional[Tuple[float, float]] = None

    # -- small helpers ---------------------------------------------------
    def fail(self, what: str, file: Optional[str] = None) -> ConvertError:
        return ConvertError(f"{file or self.files.model_file}: {what}")

    def note_param_groups(self, groups: Any, file: str) -> None:
        if not isinstance(groups, list) or not groups or not isinstance(groups[0], dict):
            raise self.fail("optimizer 'param_groups' is missing or not a list of dicts", file)
        g = groups[0]
        for i, other in enumerate(groups[1:], 1):
            diff = [k for k in ("lr", "betas", "eps", "weight_decay", "momentum")
                    if k in g and k in other and list(np.atleast_1d(g[k])) != list(np.atleast_1d(other[k]))]
            if diff:
                self.group_warnings.add(
                    f"{file}: param_groups[{i}] differs from param_groups[0] in {', '.join(diff)}; deepspeed_c "
                    "applies param_groups[0]'s values to every parameter")
        if "lr" in g:
            self.lr = float(g["lr"])
        if "betas" in g:
            b = g["betas"]
            self.betas = (float(b[0]), float(b[1]))
        for grp in groups:
            if "step" in grp:  # FusedAdam's group step (older versions counted there)
                s = _step_of(grp["step"])
                if s is not None:
                    self.group_steps.append(s)

    def note_state(self, st: Dict[str, Any], where: str) -> Dict[str, Any]:
        """The tensor states of one optimizer-state entry; records its step."""
        import torch

        out = {}
        for k, v in st.items():
            if k == "step":
                s = _step_of(v)
                if s is not None:
                    self.steps.append((s, f"{where}['step']"))
            elif torch.is_tensor(v) and v.dim() > 0:
                out[k] = v.reshape(-1)
        return out

    def optimizer_step(self) -> Optional[int]:
        """The applied optimizer steps. torch's optimizers count per parameter, all
        alike; DeepSpeed's FusedAdam (which also keeps a per-group 'step')
        advances only the count of the last parameter of a group and uses it for
        the whole group, so the largest count is the one in force."""
        if not self.steps:
            return max(self.group_steps) if self.group_steps else None
        values = sorted({s for s, _ in self.steps})
        if len(values) > 1 and not self.group_steps:
            detail = ", ".join(f"{w} = {s}" for s, w in self.steps[:6])
            print(f"convert: warning: per-parameter optimizer step counts differ ({detail}); deepspeed_c "
                  f"keeps one count and uses the largest, {values[-1]}", file=sys.stderr)
        return values[-1]

    # -- the module ------------------------------------------------------
    def module_params(self, sd: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str], Dict[str, str]]:
        """(name -> tensor) of the module's parameters (tied aliases removed), the
        dropped buffers, and the aliases found by shared storage."""
        import torch

        module = sd.get("module")
        if not isinstance(module, dict):
            raise self.fail("key 'module' is missing or not a state_dict (a pipeline-parallel checkpoint "
                            "keeps its layers in layer_*.pt files, which is not supported)")
        buffers = set(sd.get("buffer_names") or [])
        shared = dict(sd.get("shared_params") or {})
        params: Dict[str, Any] = {}
        seen: Dict[Tuple[int, int, Tuple[int, ...], Tuple[int, ...]], str] = {}
        aliases: Dict[str, str] = {}
        dropped = []
        for name, t in module.items():
            if name in buffers:
                dropped.append(name)
                continue
            if not torch.is_tensor(t):
                raise self.fail(f"module entry '{name}' is not a tensor ({type(t).__name__})")
            if name in shared:
                aliases[name] = shared[name]
                continue
            key = (t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr(),
                   t.storage_offset(), tuple(t.shape), tuple(t.stride()))
            if t.numel() > 0 and key in seen:  # tied weights share storage in the pickle
                aliases[name] = seen[key]
                continue
            seen[key] = name
            params[name] = t
        return params, dropped, aliases

    # -- ZeRO 0 ------------------------------------------------------------
    def zero0(self, sd: Dict[str, Any], module: Dict[str, Any]) -> Tuple[List[ParamState], Optional[Dict]]:
        import torch

        f = self.files.model_file
        opt = sd.get("optimizer")
        names = list(module)
        ps = [ParamState(n, tuple(module[n].shape), module[n], True) for n in names]
        if opt is None:
            return ps, None
        if not isinstance(opt, dict):
            raise self.fail(f"key 'optimizer' is a {type(opt).__name__}, not an optimizer state_dict")
        scaler = None
        if "optimizer_state_dict" in opt:  # the fp16/bf16 wrappers
            base = opt["optimizer_state_dict"]
            if opt.get("dynamic_loss_scale") is not None or "cur_scale" in opt:
                scaler = {"dynamic": bool(opt.get("dynamic_loss_scale", False)),
                          "cur_scale": float(opt.get("cur_scale", 1.0)),
                          "cur_iter": int(opt.get("cur_iter", 0)),
                          "last_overflow_iter": int(opt.get("last_overflow_iter", -1)
                                                    if opt.get("last_overflow_iter") is not None else -1),
                          "cur_hysteresis": None}
        else:
            base = opt
        if not isinstance(base, dict) or "state" not in base or "param_groups" not in base:
            raise self.fail("the optimizer state_dict has no 'state'/'param_groups' (unknown optimizer layout)")
        self.note_param_groups(base["param_groups"], f)
        order = [i for g in base["param_groups"] for i in g.get("params", [])]
        state = base["state"]
        if len(base["param_groups"]) > 1:
            # Without ZeRO nothing records which module parameter each group holds.
            raise UnsupportedCheckpointError(
                f"{f}: the optimizer has {len(base['param_groups'])} parameter groups and the checkpoint "
                "(ZeRO stage 0) does not record which parameters each holds; only one group can be mapped to "
                "the module's parameters")

        def mismatch(what: str) -> ConvertError:
            return self.fail(f"{what}: the optimizer's parameters do not match the module's "
                             f"{len(names)} parameters ({sum(p.working.numel() for p in ps)} elements) in "
                             "order; the converter assumes the run passed all the module's parameters, in "
                             "module order, to deepspeed.initialize")

        if "fp32_groups_flat" in opt:  # one flat fp32 tensor per group
            flats = opt["fp32_groups_flat"]
            pos = 0
            for g, flat in enumerate(flats):
                flat = flat.reshape(-1)
                gstate = self.note_state(state.get(order[g], {}) if g < len(order) else {}, f"{f}: optimizer "
                                         f"state of group {g}")
                off = 0
                while off < flat.numel():
                    if pos >= len(ps):
                        raise mismatch(f"fp32_groups_flat[{g}] has {flat.numel()} elements")
                    p = ps[pos]
                    n = p.working.numel()
                    if off + n > flat.numel():
                        raise mismatch(f"parameter '{p.name}' crosses the end of fp32_groups_flat[{g}]")
                    p.master = flat.narrow(0, off, n)
                    p.states = {k: v.narrow(0, off, n) for k, v in gstate.items()}
                    off += n
                    pos += 1
            if pos != len(ps):
                raise mismatch(f"fp32_groups_flat covers {pos} parameters")
            return ps, scaler
        if "fp32_groups" in opt:  # one fp32 tensor per parameter
            masters = [t for g in opt["fp32_groups"] for t in g]
            if len(masters) != len(ps):
                raise mismatch(f"fp32_groups holds {len(masters)} tensors")
            for p, m in zip(ps, masters):
                if tuple(m.shape) != p.shape:
                    raise mismatch(f"parameter '{p.name}' is {p.shape} but its fp32 master is {tuple(m.shape)}")
                p.master = m.reshape(-1)
        if len(order) != len(ps):
            raise mismatch(f"the optimizer's param_groups list {len(order)} parameters")
        any_state = any(state.get(i) for i in order)
        for p, i in zip(ps, order):
            st = state.get(i)
            if st:
                p.states = self.note_state(st, f"{f}: optimizer state[{i}] ('{p.name}')")
                for k, v in p.states.items():
                    if v.numel() != p.working.numel():
                        raise self.fail(f"optimizer state[{i}]['{k}'] has {v.numel()} elements but "
                                        f"parameter '{p.name}' has {p.working.numel()}")
            elif any_state and "fp32_groups" not in opt:
                # The optimizer never updated it (no gradient ever): DeepSpeed's run treats it as frozen.
                p.trainable = False
                print(f"convert: warning: parameter '{p.name}' has no optimizer state although others "
                      "do; it is converted as frozen (it never received a gradient)", file=sys.stderr)
        if "fp32_groups" not in opt:
            for p in ps:
                p.master = p.working.reshape(-1).to(torch.float32)
        return ps, scaler

    # -- ZeRO 1/2 and bf16 ---------------------------------------------------
    def param_shape_groups(self, sd: Dict[str, Any], why: str = "") -> List[Dict[str, Any]]:
        """`param_shapes`: the optimizer's parameters, one {name: shape} per group."""
        shapes = sd.get("param_shapes")
        if not isinstance(shapes, list) or not all(isinstance(g, dict) for g in shapes):
            raise self.fail("key 'param_shapes' is missing or not a list of {name: shape} per group" + why)
        return shapes

    def rank_optimizer_states(self, required: str, kind: str) -> Iterator[Tuple[str, Dict[str, Any]]]:
        """(path, 'optimizer_state_dict') of each rank's optimizer file in turn,
        with a progress line, checked to hold `required`."""
        files = self.files.optim_files
        for i, path in enumerate(files):
            self.progress(f"loading {path} ({i + 1}/{len(files)})")
            top = load_pt(path)
            osd = top.get("optimizer_state_dict") if isinstance(top, dict) else None
            if not isinstance(osd, dict) or required not in osd:
                raise ConvertError(f"{path}: 'optimizer_state_dict' with '{required}' is missing "
                                   f"(not a {kind} optimizer file)")
            yield path, osd

    def zero12(self, sd: Dict[str, Any], module: Dict[str, Any]) -> Tuple[List[ParamState], Optional[Dict], int, int]:
        files = self.files.optim_files
        shapes = self.param_shape_groups(sd, " (needed to split the ZeRO partitions)")
        osds = [osd for _, osd in self.rank_optimizer_states("single_partition_of_fp32_groups", "ZeRO-1/2")]
        # absent in the bf16 optimizer's (ZeRO 1); DeepSpeed's ZeroStageEnum member names
        stage = enum_int(osds[0].get("zero_stage", 1),
                         {"disabled": 0, "optimizer_states": 1, "gradients": 2, "weights": 3})
        if not isinstance(stage, int):
            raise ConvertError(f"{files[0]}: 'zero_stage' is not an integer ({stage!r})")
        if stage == 3:
            raise ConvertError(f"{files[0]}: ZeRO stage 3 optimizer state beside a non-ZeRO-3 model states file "
                               f"({self.files.model_file}): the tag directory mixes two checkpoints")
        counts = osds[0].get("partition_count")
        counts = counts if isinstance(counts, list) else [counts]
        world = max(int(c) for c in counts if c is not None) if counts and counts[0] is not None else len(files)
        if world != len(files):
            raise ConvertError(f"{self.files.tag_dir}: partition_count says {world} ranks but {len(files)} "
                               "optimizer files were found (a rank's file is missing or left over)")
        paddings = osds[0].get("param_alignment_paddings")
        ps_by_name: Dict[str, ParamState] = {}
        for g, gshapes in enumerate(shapes):
            layout, needed = zero_merge.group_layout(gshapes, paddings[g] if paddings else None, g,
                                                     self.files.model_file)
            master = zero_merge.concat_ranks([o["single_partition_of_fp32_groups"][g] for o in osds], needed,
                                             f"single_partition_of_fp32_groups[{g}]", files)
            masters = zero_merge.split_group(master, layout)
            states = {}
            for key, flat in self.group_states(osds, g, files).items():
                if flat.numel() < needed:
                    raise ConvertError(f"optimizer state '{key}' of group {g}: the ranks' partitions "
                                       f"({', '.join(files)}) hold {flat.numel()} elements but the "
                                       f"parameters listed in param_shapes need {needed}")
                states[key] = zero_merge.split_group(flat, layout)
            for name, shape, _ in layout:
                t = module.get(name)
                if t is None:
                    raise self.fail(f"param_shapes[{g}] lists '{name}' but 'module' has no such entry")
                if tuple(t.shape) != shape:
                    raise self.fail(f"parameter '{name}': param_shapes says {shape}, module holds "
                                    f"{tuple(t.shape)}")
                ps_by_name[name] = ParamState(name, shape, t, True, masters[name],
                                              {k: v[name] for k, v in states.items()})
        out = []
        for name, t in module.items():  # module order; the rest are frozen (or have no elements)
            p = ps_by_name.get(name)
            out.append(p if p else ParamState(name, tuple(t.shape), t, t.numel() == 0))
        first = osds[0]
        scaler = self.zero_scaler(first.get("loss_scaler"), first.get("dynamic_loss_scale"))
        return out, scaler, world, stage

    # -- ZeRO 3 ------------------------------------------------------------
    def zero3(self, sd: Dict[str, Any], module: Dict[str, Any], working_dtype: Any
              ) -> Tuple[List[ParamState], Optional[Dict], int]:
        """Each rank's file holds, per parameter in `param_shapes` order, its
        ceil(numel / world) elements (the last rank's padded), concatenated
        over the rank's sub-groups (`fp32_flat_groups`; the base optimizer's
        state i belongs to sub-group i)."""
        import torch

        files = self.files.optim_files
        if not files:
            raise ConvertError(f"{self.files.tag_dir}: ZeRO-3 model states but no *_optim_states.pt files")
        shapes = self.param_shape_groups(sd)
        merged = {k: tuple(int(d) for d in v) for g in shapes for k, v in g.items()}
        flats, states, scaler = [], [], None
        for i, (path, osd) in enumerate(self.rank_optimizer_states("fp32_flat_groups", "ZeRO-3")):
            groups = osd["fp32_flat_groups"]
            flats.append(torch.cat([t.reshape(-1) for t in groups]))
            base = osd.get("optimizer_state_dict")
            if not isinstance(base, dict) or "state" not in base:
                raise ConvertError(f"{path}: the base optimizer's 'optimizer_state_dict' is missing")
            self.note_param_groups(base.get("param_groups"), path)
            per_group = [self.note_state(base["state"].get(j, {}), f"{path}: optimizer state[{j}]")
                         for j in range(len(groups))]
            keys = set(per_group[0]) if per_group else set()
            for j, st in enumerate(per_group):
                if set(st) != keys:
                    raise ConvertError(f"{path}: optimizer state[{j}] has keys {sorted(st)}, state[0] "
                                       f"{sorted(keys)}")
                for k, v in st.items():
                    if v.numel() != groups[j].numel():
                        raise ConvertError(f"{path}: optimizer state[{j}]['{k}'] has {v.numel()} elements, "
                                           f"fp32_flat_groups[{j}] {groups[j].numel()}")
            states.append({k: torch.cat([st[k] for st in per_group]) for k in keys})
            if i == 0:
                scaler = self.zero_scaler(osd.get("loss_scaler"), osd.get("dynamic_loss_scale"))
        world = len(files)
        keys = set(states[0])
        for st, path in zip(states, files):
            if set(st) != keys:
                raise ConvertError(f"{path}: optimizer state keys {sorted(st)} differ from rank 0's {sorted(keys)}")
        ps_by_name: Dict[str, ParamState] = {}
        offset = 0
        for name, shape in merged.items():
            numel = _numel(shape)
            part = -(-numel // world)
            for flat, path in zip(flats, files):
                if offset + part > flat.numel():
                    raise ConvertError(f"{path}: fp32_flat_groups end at {flat.numel()} elements, before "
                                       f"parameter '{name}' ({offset} + {part})")

            def gather(pieces: List[Any]) -> Any:
                return torch.cat([p.narrow(0, offset, part) for p in pieces]).narrow(0, 0, numel)

            master = gather(flats)
            if name not in module:
                raise self.fail(f"param_shapes lists '{name}' but 'module' has no such entry")
            ps_by_name[name] = ParamState(name, shape, master.reshape(shape).to(working_dtype), True, master,
                                          {k: gather([st[k] for st in states]) for k in keys})
            offset += part
        frozen = self.zero3_frozen(sd, working_dtype)
        out = []
        for name in module:
            p = ps_by_name.get(name) or frozen.get(name)
            if p is None:
                raise self.fail(f"parameter '{name}' is in 'module' but neither in param_shapes nor in "
                                "frozen_param_shapes")
            out.append(p)
        return out, scaler, world

    def zero3_frozen(self, sd: Dict[str, Any], working_dtype: Any) -> Dict[str, ParamState]:
        """Frozen parameters: each rank's model states file holds its fragment."""
        import torch

        shapes = sd.get("frozen_param_shapes") or {}
        if not shapes:
            return {}
        frags = []
        for path in self.files.zero3_model_files:
            msd = sd if path == self.files.model_file else load_pt(path)
            f = msd.get("frozen_param_fragments") if isinstance(msd, dict) else None
            if not isinstance(f, dict):
                raise ConvertError(f"{path}: 'frozen_param_fragments' is missing")
            frags.append(f)
        out = {}
        for name, shape in shapes.items():
            shape = tuple(int(d) for d in shape)
            numel = _numel(shape)
            pieces = []
            for f, path in zip(frags, self.files.zero3_model_files):
                if name not in f:
                    raise ConvertError(f"{path}: frozen_param_fragments has no '{name}'")
                pieces.append(f[name].reshape(-1))
            full = torch.cat(pieces).narrow(0, 0, numel).reshape(shape)
            out[name] = ParamState(name, shape, full.to(working_dtype), numel == 0)
        return out

    def group_states(self, osds: List[Dict], g: int, files: List[str]) -> Dict[str, Any]:
        """Optimizer state key -> the group's flat state, concatenated over ranks."""
        import torch

        per_rank = []
        for o, path in zip(osds, files):
            base = o.get("base_optimizer_state")
            if isinstance(base, list):  # elastic: one lean state dict per group
                if g >= len(base):
                    raise ConvertError(f"{path}: base_optimizer_state has no group {g}")
                st = base[g]
                if "base_optimizer_state_step" in o:
                    s = _step_of(o["base_optimizer_state_step"])
                    if s is not None:
                        self.steps.append((s, f"{path}: base_optimizer_state_step"))
            elif isinstance(base, dict) and "state" in base:
                self.note_param_groups(base.get("param_groups"), path)
                idx = base["param_groups"][g]["params"][0] if g < len(base["param_groups"]) else g
                st = base["state"].get(idx, {})
            else:
                raise ConvertError(f"{path}: 'base_optimizer_state' is missing or of an unknown layout")
            per_rank.append(self.note_state(st, f"{path}: base_optimizer_state group {g}"))
        keys = set(per_rank[0])
        for st, path in zip(per_rank, files):
            if set(st) != keys:
                raise ConvertError(f"{path}: optimizer state keys {sorted(st)} differ from rank 0's "
                                   f"{sorted(keys)} (group {g})")
        return {k: torch.cat([st[k] for st in per_rank]) for k in sorted(keys)}

    def zero_scaler(self, obj: Any, dynamic: Any) -> Optional[Dict[str, Any]]:
        if obj is None:
            return None
        cur_scale = attr(obj, "cur_scale")
        if cur_scale is None:
            return None
        dyn = attr(obj, "dynamic", dynamic)
        return {"dynamic": bool(dyn),
                "cur_scale": float(cur_scale),
                "cur_iter": int(attr(obj, "cur_iter", 0) or 0),
                "last_overflow_iter": int(attr(obj, "last_overflow_iter", -1)
                                          if attr(obj, "last_overflow_iter", -1) is not None else -1),
                "cur_hysteresis": (int(attr(obj, "cur_hysteresis")) if attr(obj, "cur_hysteresis") is not None
                                   else None)}


def _jsonable(value: Any, path: str) -> Any:
    """Client state as JSON: tensors and arrays become (nested) lists."""
    import numbers

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if v != v or v in (float("inf"), float("-inf")):
            raise ConvertError(f"client state key '{path}' is {v}, which JSON cannot hold")
        return v
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int)):
                raise ConvertError(f"client state key '{path}' has a {type(k).__name__} key, which JSON "
                                   "cannot hold")
            out[str(k)] = _jsonable(v, f"{path}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{path}[{i}]") for i, v in enumerate(value)]
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, Placeholder):
        return _jsonable(tolist(), path)
    raise ConvertError(f"client state key '{path}' holds a {type(value).__module__}.{type(value).__name__}, "
                       "which is not JSON (use --drop-client-key to leave it out)")


def _working_dtype(cfg: Any, model_file: str) -> Any:
    """The run's 16-bit dtype (ZeRO-3 saves no full working weights: they are
    the fp32 master rounded, as DeepSpeed makes them after every step)."""
    import torch

    if not isinstance(cfg, dict):
        raise ConvertError(f"{model_file}: a ZeRO-3 checkpoint needs its 'ds_config' to tell the working dtype")

    def enabled(key: str) -> bool:
        sec = cfg.get(key)
        return isinstance(sec, dict) and bool(sec.get("enabled", False))

    if enabled("bf16") or enabled("bfloat16"):
        return torch.bfloat16
    if enabled("fp16"):
        return torch.float16
    return torch.float32


def read(files: DsFiles, progress: Callable[[str], None],
         drop_client_keys: Tuple[str, ...] = ()) -> DsRun:
    """Everything the conversion needs from the DeepSpeed checkpoint `files`."""
    progress(f"loading {files.model_file}")
    sd = load_pt(files.model_file)
    if not isinstance(sd, dict):
        raise ConvertError(f"{files.model_file}: not a DeepSpeed model states dict ({type(sd).__name__})")
    r = _Reader(files, progress)
    module, dropped, aliases = r.module_params(sd)
    zero_opt = sd.get("optimizer") is None and sd.get("param_shapes") is not None
    if zero_opt and not files.optim_files and not files.zero3_model_files:
        raise ConvertError(f"{files.tag_dir}: the model states file lists ZeRO 'param_shapes' but no "
                           "*zero_pp_rank_*_optim_states.pt file is there")
    if files.zero3_model_files:
        params, scaler, world = r.zero3(sd, module, _working_dtype(sd.get("ds_config"), files.model_file))
        stage = 3
        if len(files.zero3_model_files) != world:
            raise ConvertError(f"{files.tag_dir}: {len(files.zero3_model_files)} ZeRO-3 model states files but "
                               f"{world} optimizer files")
    elif zero_opt:
        params, scaler, world, stage = r.zero12(sd, module)
    else:
        params, scaler = r.zero0(sd, module)
        world = int(sd.get("dp_world_size") or 1)
        stage = 0
    client = {}
    for k, v in sd.items():
        if k in _DS_MODEL_KEYS or k in drop_client_keys:
            continue
        client[str(k)] = _jsonable(v, str(k))
    sched = sd.get("lr_scheduler")
    if sched is not None and not isinstance(sched, dict):
        raise ConvertError(f"{files.model_file}: key 'lr_scheduler' is a {type(sched).__name__}, not a state_dict")

    def counter(key: str, default: Optional[int]) -> Optional[int]:
        v = sd.get(key, default)
        if v is None:
            return None
        try:
            return int(v)
        except (TypeError, ValueError):
            raise ConvertError(f"{files.model_file}: key '{key}' is not an integer ({v!r})") from None

    for w in sorted(r.group_warnings):
        print(f"convert: warning: {w}", file=sys.stderr)
    return DsRun(files=files, params=params, dropped_buffers=dropped, aliases=aliases, zero_stage=stage,
                 dp_world_size=world, optimizer_step=r.optimizer_step(), lr=r.lr, betas=r.betas,
                 scheduler_state=sched, loss_scaler=scaler, global_steps=counter("global_steps", 0) or 0,
                 global_samples=counter("global_samples", None), skipped_steps=counter("skipped_steps", 0) or 0,
                 client_state=client, ds_config=sd.get("ds_config"), ds_version=sd.get("ds_version"))
