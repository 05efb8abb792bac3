"""python -m deepspeed_c.convert: DeepSpeed checkpoints -> deepspeed_c.

The DeepSpeed checkpoints here are written by the test itself with
torch.save in DeepSpeed's layout (file names, keys, ZeRO-1/2 flat partitions
with alignment padding, per-rank files; the facts are DeepSpeed's, see
deepspeed_c/convert/ds_reader.py), so this runs without DeepSpeed. The
expected values are the test's own random inputs and a float64 AdamW
formula, never the converter's output. test_convert_real_deepspeed.py does
the same against a checkpoint real DeepSpeed saved.
"""
import contextlib
import io
import enum
import math
import os
import subprocess
import sys
import types
from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dsc = pytest.importorskip("deepspeed_c")

BETAS = (0.9, 0.99)
EPS = 1e-8
WD = 0.1
WARMUP = 10
MAX_LR = 0.01

# Classes DeepSpeed pickles into its checkpoints (the loss scaler, the ZeRO
# stage enum). They are pickled from a module that is removed again before
# the conversion, so the converter meets classes it cannot import, as it does
# on a machine without DeepSpeed.
_MISSING = "_dsc_test_missing_deepspeed"


class ZeroStageEnum(enum.IntEnum):
    disabled = 0
    optimizer_states = 1
    gradients = 2


class LossScaler:
    def __init__(self, scale):
        self.cur_scale = scale
        self.dynamic = False


class DynamicLossScaler:
    def __init__(self, cur_scale, cur_iter, last_overflow_iter, cur_hysteresis):
        self.cur_scale = cur_scale
        self.cur_iter = cur_iter
        self.last_overflow_iter = last_overflow_iter
        self.scale_factor = 2.0
        self.scale_window = 1000
        self.min_scale = 1.0
        self.delayed_shift = 2
        self.cur_hysteresis = cur_hysteresis
        self.consecutive_hysteresis = False
        self.dynamic = True


def _save_with_missing_classes(obj, path):
    mod = types.ModuleType(_MISSING)
    for cls in (ZeroStageEnum, LossScaler, DynamicLossScaler):
        cls.__module__ = _MISSING
        setattr(mod, cls.__name__, cls)
    sys.modules[_MISSING] = mod
    try:
        torch.save(obj, path)
    finally:
        del sys.modules[_MISSING]


def _config(stage, precision="fp32", hysteresis=2):
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "gradient_clipping": 0.0,
           "optimizer": {"type": "AdamW", "params": {"lr": MAX_LR, "betas": list(BETAS), "eps": EPS,
                                                     "weight_decay": WD}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": WARMUP, "warmup_max_lr": MAX_LR}},
           "zero_optimization": {"stage": stage}}
    if precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    if precision == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 16, "hysteresis": hysteresis}
    return cfg


def _warmup_lr(last_batch_iteration):
    # WarmupLR, log warmup: max_lr * log(i + 1) / log(warmup_num_steps)
    return MAX_LR * math.log(last_batch_iteration + 1) / math.log(WARMUP)


class Run:
    """The state of an imaginary DeepSpeed run at step `step`: per-parameter
    fp32 master, moments, working dtype, plus counters."""

    def __init__(self, shapes, precision, seed, step=4, frozen=()):
        rng = np.random.default_rng(seed)
        self.precision = precision
        self.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        self.shapes = OrderedDict(shapes)
        self.frozen = set(frozen)
        self.master = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes}
        self.exp_avg = {n: (0.1 * rng.standard_normal(s)).astype(np.float32) for n, s in shapes}
        self.exp_avg_sq = {n: (0.01 * rng.random(s) + 1e-4).astype(np.float32) for n, s in shapes}
        self.step = step
        self.lr = _warmup_lr(step - 1)  # param_groups' lr: what the next step uses
        self.global_steps = step + 1     # one skipped (overflow) step
        self.skipped_steps = 1
        self.global_samples = 2 * self.global_steps

    def working(self, name):
        return torch.from_numpy(self.master[name]).to(self.dtype)

    def module(self):
        m = OrderedDict((n, self.working(n)) for n in self.shapes)
        m["bn.running_mean"] = torch.zeros(3)  # a buffer: not a parameter
        return m

    def trainable(self):
        return [n for n in self.shapes if n not in self.frozen]


def _model_states(run, cfg, world, optimizer=None, param_shapes=None, extra=None):
    sd = dict(module=run.module(), buffer_names=["bn.running_mean"], optimizer=optimizer,
              param_shapes=param_shapes, frozen_param_shapes=None, shared_params={} if param_shapes else None,
              frozen_param_fragments=None, lr_scheduler={"last_batch_iteration": run.step - 1},
              data_sampler=None, random_ltd=None, skipped_steps=run.skipped_steps, global_steps=run.global_steps,
              global_samples=run.global_samples, dp_world_size=world, mp_world_size=1,
              checkpoint_parallel_dimensions={"pp_degree": 1, "tp_degree": 1}, ds_config=cfg, ds_version="0.19.8")
    sd.update(extra or {"epoch": 3, "best_loss": torch.tensor(0.25), "history": (1, 2)})
    return sd


def write_zero0_fp32(root, run, cfg):
    """ZeRO 0, fp32: torch AdamW's state_dict inside the model states file."""
    names = list(run.shapes)
    state = {i: {"step": torch.tensor(float(run.step)), "exp_avg": torch.from_numpy(run.exp_avg[n]),
                 "exp_avg_sq": torch.from_numpy(run.exp_avg_sq[n])} for i, n in enumerate(names)}
    groups = [{"lr": run.lr, "betas": BETAS, "eps": EPS, "weight_decay": WD, "amsgrad": False,
               "params": list(range(len(names)))}]
    tag = os.path.join(root, f"global_step{run.global_steps}")
    os.makedirs(tag)
    _save_with_missing_classes(_model_states(run, cfg, 1, {"state": state, "param_groups": groups}),
                               os.path.join(tag, "mp_rank_00_model_states.pt"))
    with open(os.path.join(root, "latest"), "w") as f:
        f.write(f"global_step{run.global_steps}")


def write_zero0_fp16(root, run, cfg, scaler, fused):
    """ZeRO 0, fp16: the fused wrapper (one flat fp32 master per group) or the
    unfused one (one fp32 master per parameter)."""
    names = list(run.shapes)
    opt = {"dynamic_loss_scale": True, "cur_scale": scaler["cur_scale"], "cur_iter": scaler["cur_iter"],
           "last_overflow_iter": scaler["last_overflow_iter"], "scale_factor": 2.0, "scale_window": 1000}
    if fused:
        flat = torch.cat([torch.from_numpy(run.master[n]).reshape(-1) for n in names])
        m = torch.cat([torch.from_numpy(run.exp_avg[n]).reshape(-1) for n in names])
        v = torch.cat([torch.from_numpy(run.exp_avg_sq[n]).reshape(-1) for n in names])
        opt["optimizer_state_dict"] = {"state": {0: {"step": run.step, "exp_avg": m, "exp_avg_sq": v}},
                                       "param_groups": [{"lr": run.lr, "betas": BETAS, "eps": EPS,
                                                         "weight_decay": WD, "step": run.step, "params": [0]}]}
        opt.update(fp32_groups_flat=[flat], clip_grad=0.0)
    else:
        state = {i: {"step": torch.tensor(float(run.step)), "exp_avg": torch.from_numpy(run.exp_avg[n]),
                     "exp_avg_sq": torch.from_numpy(run.exp_avg_sq[n])} for i, n in enumerate(names)}
        opt["optimizer_state_dict"] = {"state": state, "param_groups": [
            {"lr": run.lr, "betas": BETAS, "eps": EPS, "weight_decay": WD, "params": list(range(len(names)))}]}
        opt["fp32_groups"] = [[torch.from_numpy(run.master[n]) for n in names]]
    tag = os.path.join(root, "my_tag")
    os.makedirs(tag)
    _save_with_missing_classes(_model_states(run, cfg, 1, opt), os.path.join(tag, "mp_rank_00_model_states.pt"))
    with open(os.path.join(root, "latest"), "w") as f:
        f.write("my_tag\n")


def _flat_layout(sizes, param_align, world):
    """DeepSpeed's ZeRO-1/2 flat group: offsets with alignment padding after
    each parameter but the last, then padded to a multiple of 2 * world."""
    offsets, pads, cur = [], [], 0
    for i, n in enumerate(sizes):
        offsets.append(cur)
        cur += n
        pad = 0 if i == len(sizes) - 1 else (-cur) % param_align
        pads.append(pad)
        cur += pad
    used = cur
    total = -(-used // (2 * world)) * (2 * world)
    return offsets, pads, used, total


def write_zero12(root, run, cfg, world, groups, stage, scaler_obj, param_align=1, elastic=False):
    """ZeRO 1/2 over `world` ranks. `groups`: lists of parameter names, in
    flat order. Padding is filled with NaN so reading it would show."""
    param_shapes, per_rank = [], [dict(fp32=[], m=[], v=[], pads=[]) for _ in range(world)]
    alignment_pads = []
    for names in groups:
        sizes = [run.master[n].size for n in names]
        offsets, pads, used, total = _flat_layout(sizes, param_align, world)
        alignment_pads.append(pads)
        flats = {k: torch.full((total,), float("nan")) for k in ("fp32", "m", "v")}
        for n, off, size in zip(names, offsets, sizes):
            flats["fp32"][off:off + size] = torch.from_numpy(run.master[n].reshape(-1))
            flats["m"][off:off + size] = torch.from_numpy(run.exp_avg[n].reshape(-1))
            flats["v"][off:off + size] = torch.from_numpy(run.exp_avg_sq[n].reshape(-1))
        ps = total // world
        for r in range(world):
            left = r * ps
            pad = ps if used <= left else (left + ps - used if used < left + ps else 0)
            rr = per_rank[r]
            rr["fp32"].append(flats["fp32"][left:left + ps - pad].clone())  # saved without padding
            keep = ps - pad if elastic else ps
            rr["m"].append(flats["m"][left:left + keep].clone())
            rr["v"].append(flats["v"][left:left + keep].clone())
            rr["pads"].append(pad)
        param_shapes.append(OrderedDict((n, torch.Size(run.shapes[n])) for n in names))
    tag = os.path.join(root, "global_step5")
    os.makedirs(tag)
    prefix = "bf16_" if run.precision == "bf16" else ""
    for r in range(world):
        rr = per_rank[r]
        if elastic:
            base = [{"exp_avg": m, "exp_avg_sq": v} for m, v in zip(rr["m"], rr["v"])]
            extra = {"base_optimizer_state_step": run.step}
        else:
            # FusedAdam: the group's count sits in the group and its (only) flat parameter's state
            base = {"state": {g: {"step": run.step, "exp_avg": m, "exp_avg_sq": v}
                              for g, (m, v) in enumerate(zip(rr["m"], rr["v"]))},
                    "param_groups": [{"lr": run.lr, "betas": BETAS, "eps": EPS, "weight_decay": WD, "step": 0,
                                      "params": [g]} for g in range(len(groups))]}
            extra = {}
        osd = dict(loss_scaler=scaler_obj, dynamic_loss_scale=getattr(scaler_obj, "dynamic", False),
                   overflow=False, clip_grad=0.0, base_optimizer_state=base, single_partition_of_fp32_groups=rr["fp32"],
                   zero_stage=ZeroStageEnum(stage), group_paddings=rr["pads"], param_alignment_paddings=alignment_pads,
                   partition_count=[world] * len(groups), ds_version="0.19.8", param_slice_mappings=[], **extra)
        _save_with_missing_classes({"optimizer_state_dict": osd, "ds_config": cfg, "ds_version": "0.19.8"},
                                   os.path.join(tag, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
    _save_with_missing_classes(_model_states(run, cfg, world, None, param_shapes),
                               os.path.join(tag, "mp_rank_00_model_states.pt"))
    with open(os.path.join(root, "latest"), "w") as f:
        f.write("global_step5")


def write_zero3(root, run, cfg, world, groups):
    """ZeRO-3 over `world` ranks: every parameter split into world pieces of
    ceil(numel / world) (the last padded, with NaN here); rank r's pieces of
    the parameters in `param_shapes` order, cut into sub-groups
    (`fp32_flat_groups`, one base-optimizer state per sub-group); frozen
    parameters' pieces in each rank's model states file."""
    names = [n for g in groups for n in g]
    pieces = {k: [[] for _ in range(world)] for k in ("fp32", "m", "v")}
    for n in names:
        numel = run.master[n].size
        part = -(-numel // world)
        for k, src in (("fp32", run.master), ("m", run.exp_avg), ("v", run.exp_avg_sq)):
            full = torch.full((part * world,), float("nan"))
            full[:numel] = torch.from_numpy(src[n].reshape(-1))
            for r in range(world):
                pieces[k][r].append(full[r * part:(r + 1) * part])
    tag = os.path.join(root, "global_step5")
    os.makedirs(tag)
    for r in range(world):
        flat = {k: torch.cat(pieces[k][r]) for k in pieces}
        cut = flat["fp32"].numel() // 2  # two sub-groups
        sub = {k: [v[:cut].clone(), v[cut:].clone()] for k, v in flat.items()}
        base = {"state": {j: {"step": run.step, "exp_avg": sub["m"][j], "exp_avg_sq": sub["v"][j]} for j in (0, 1)},
                "param_groups": [{"lr": run.lr, "betas": BETAS, "eps": EPS, "weight_decay": WD, "step": 0,
                                  "params": [0, 1]}]}
        osd = dict(zero_stage=3, loss_scaler=LossScaler(1.0), dynamic_loss_scale=False,
                   overflow=False, partition_count=world, optimizer_state_dict=base, fp32_flat_groups=sub["fp32"])
        _save_with_missing_classes({"optimizer_state_dict": osd, "ds_config": cfg, "ds_version": "0.19.8"},
                                   os.path.join(tag, f"bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
        frozen_shapes = OrderedDict((n, torch.Size(run.shapes[n])) for n in run.frozen)
        frags = OrderedDict()
        for n in run.frozen:
            numel = run.master[n].size
            part = -(-numel // world)
            full = torch.zeros(part * world, dtype=run.dtype)
            full[:numel] = run.working(n).reshape(-1)
            frags[n] = full[r * part:(r + 1) * part].clone()
        sd = _model_states(run, cfg, world, None, [OrderedDict((n, torch.Size(run.shapes[n])) for n in g)
                                                   for g in groups])
        sd["module"] = OrderedDict((n, torch.empty(0, dtype=run.dtype)) for n in run.shapes)  # placeholders
        sd["module"]["bn.running_mean"] = torch.zeros(3)
        sd.update(frozen_param_shapes=frozen_shapes, frozen_param_fragments=frags)
        _save_with_missing_classes(sd, os.path.join(tag, f"zero_pp_rank_{r}_mp_rank_00_model_states.pt"))
    with open(os.path.join(root, "latest"), "w") as f:
        f.write("global_step5")


def _convert(src, dst, *extra):
    """The command line, run in this process (as `python -m deepspeed_c.convert ...`)."""
    from deepspeed_c.convert.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([str(src), str(dst), *extra])
    return types.SimpleNamespace(returncode=code, stderr=err.getvalue())


def _load(run, cfg, out):
    eng = dsc.Engine(cfg)
    for n, s in run.shapes.items():
        eng.add_param(n, np.zeros(s, np.float32), trainable=n not in run.frozen)
    eng.init()
    _, client = eng.load_checkpoint(out)
    return eng, client


def _check_loaded(eng, run, client, exact_lr=True):
    for n in run.trainable():
        np.testing.assert_array_equal(eng.get_full_fp32_param(n), run.master[n], err_msg=n)
        np.testing.assert_array_equal(eng.get_full_optimizer_state(n, "exp_avg"), run.exp_avg[n], err_msg=n)
        np.testing.assert_array_equal(eng.get_full_optimizer_state(n, "exp_avg_sq"), run.exp_avg_sq[n], err_msg=n)
    for n in run.shapes:  # working weights: DeepSpeed's, bit for bit
        w = torch.from_dlpack(eng.param(n)) if run.precision == "bf16" else torch.from_numpy(eng.param(n).numpy())
        assert torch.equal(w.reshape(run.shapes[n]), run.working(n)), n
    # The saved param_groups lr, exactly; elastic ZeRO state keeps none: the schedule's at the index.
    assert eng.lr == run.lr if exact_lr else eng.lr == pytest.approx(run.lr, rel=1e-12)
    assert (eng.global_steps, eng.skipped_steps, eng.global_samples) == (run.global_steps, run.skipped_steps,
                                                                          run.global_samples)
    assert client == {"epoch": 3, "best_loss": 0.25, "history": [1, 2]}


def _step_and_check(eng, run, seed):
    """One more step against float64 AdamW (decoupled weight decay) at t = step + 1,
    the saved lr, then the schedule's next lr."""
    rng = np.random.default_rng(seed)
    # Values exact in bf16 and fp16, so the working-precision gradient the engine keeps is this one.
    grads = {n: torch.from_numpy(rng.standard_normal(run.shapes[n]).astype(np.float32)).to(torch.bfloat16)
             .float().numpy() for n in run.trainable()}
    for n, g in grads.items():
        eng.accumulate_grad(n, g * np.float32(eng.loss_multiplier), predivided=True)
    eng.backward()
    info = eng.step()
    assert info.stepped and not info.skipped
    assert info.lr == pytest.approx(run.lr, rel=1e-12)
    t = run.step + 1
    b1, b2 = BETAS
    for n, g in grads.items():
        g64 = g.astype(np.float64)
        m = b1 * run.exp_avg[n] + (1 - b1) * g64
        v = b2 * run.exp_avg_sq[n] + (1 - b2) * g64 * g64
        p = run.master[n].astype(np.float64) * (1 - run.lr * WD)
        p -= run.lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + EPS)
        np.testing.assert_allclose(eng.get_full_fp32_param(n), p, rtol=2e-6, atol=1e-7, err_msg=n)
        np.testing.assert_allclose(eng.get_full_optimizer_state(n, "exp_avg_sq"), v, rtol=2e-6, err_msg=n)
    assert eng.lr == pytest.approx(_warmup_lr(run.step), rel=1e-12)
    assert eng.global_steps == run.global_steps + 1


SHAPES = [("fc1.weight", (5, 3)), ("fc1.bias", (5,)), ("fc2.weight", (2, 5)), ("fc2.bias", (2,))]


def test_zero0_fp32(tmp_path):
    run = Run(SHAPES, "fp32", seed=1)
    cfg = _config(0)
    write_zero0_fp32(tmp_path / "ds", run, cfg)
    # through the module's entry point, as a user runs it
    r = subprocess.run([sys.executable, "-m", "deepspeed_c.convert", str(tmp_path / "ds"), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "bn.running_mean" in r.stderr  # the dropped buffer is named
    with open(tmp_path / "out" / "latest") as f:
        assert f.read() == f"global_step{run.global_steps}"
    eng, client = _load(run, cfg, tmp_path / "out")
    with eng:
        _check_loaded(eng, run, client)
        _step_and_check(eng, run, seed=11)


def test_tied_parameter_converted_once(tmp_path):
    """A tied alias (the same tensor under two names in `module`) is stored once."""
    run = Run(SHAPES, "fp32", seed=15)
    cfg = _config(0)
    module = run.module

    def tied_module():
        m = module()
        m["head.weight"] = m["fc2.weight"]  # the same storage, as a tied nn.Parameter pickles
        return m

    run.module = tied_module
    write_zero0_fp32(tmp_path / "ds", run, cfg)
    r = _convert(tmp_path / "ds", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "head.weight -> fc2.weight" in r.stderr
    eng, client = _load(run, cfg, tmp_path / "out")  # strict: no 'head.weight' in the checkpoint
    with eng:
        _check_loaded(eng, run, client)


@pytest.mark.parametrize("stage,world,param_align,elastic", [(2, 2, 8, False), (1, 3, 1, True), (2, 4, 8, True)])
def test_zero12_bf16_partitions_merge(tmp_path, stage, world, param_align, elastic):
    shapes = SHAPES + [("emb.weight", (7, 3)), ("frozen.weight", (3, 3))]
    run = Run(shapes, "bf16", seed=2 + world, frozen={"frozen.weight"})
    cfg = _config(stage, "bf16")
    groups = [["fc2.bias", "fc1.weight", "emb.weight"], ["fc1.bias", "fc2.weight"]]  # round-robin order
    write_zero12(tmp_path / "ds", run, cfg, world, groups, stage, LossScaler(1.0), param_align, elastic)
    r = _convert(tmp_path / "ds", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    eng, client = _load(run, cfg, tmp_path / "out")
    with eng:
        assert [p.trainable for p in eng.named_parameters()] == [n not in run.frozen for n in run.shapes]
        _check_loaded(eng, run, client, exact_lr=not elastic)
        _step_and_check(eng, run, seed=12)


def test_zero2_fp16_loss_scaler(tmp_path):
    run = Run(SHAPES, "fp16", seed=3)
    cfg = _config(2, "fp16", hysteresis=2)
    scaler = DynamicLossScaler(cur_scale=2.0 ** 7, cur_iter=run.global_steps, last_overflow_iter=2, cur_hysteresis=1)
    write_zero12(tmp_path / "ds", run, cfg, 2, [list(run.shapes)], 2, scaler)
    r = _convert(tmp_path / "ds", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    eng, client = _load(run, cfg, tmp_path / "out")
    with eng:
        _check_loaded(eng, run, client)
        assert eng.loss_scale == 2.0 ** 7
        # cur_hysteresis 1 came over (the config's is 2): the next overflow halves the scale at once.
        for n in run.trainable():
            g = np.zeros(run.shapes[n], np.float32)
            g.reshape(-1)[0] = np.inf
            eng.accumulate_grad(n, g, predivided=True)
        eng.backward()
        info = eng.step()
        assert info.skipped and eng.loss_scale == 2.0 ** 6
        assert eng.skipped_steps == run.skipped_steps + 1


@pytest.mark.parametrize("world", [1, 3])
def test_zero3_bf16_partitions_merge(tmp_path, world):
    shapes = SHAPES + [("emb.weight", (7, 3)), ("frozen.weight", (3, 3))]
    run = Run(shapes, "bf16", seed=30 + world, frozen={"frozen.weight"})
    cfg = _config(3, "bf16")
    groups = [["fc1.weight", "fc1.bias", "emb.weight"], ["fc2.weight", "fc2.bias"]]
    write_zero3(tmp_path / "ds", run, cfg, world, groups)
    r = _convert(tmp_path / "ds", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    eng, client = _load(run, cfg, tmp_path / "out")
    with eng:
        assert [p.trainable for p in eng.named_parameters()] == [n not in run.frozen for n in run.shapes]
        _check_loaded(eng, run, client)
        _step_and_check(eng, run, seed=14)


@pytest.mark.parametrize("fused", [True, False])
def test_zero0_fp16_wrappers(tmp_path, fused):
    run = Run(SHAPES, "fp16", seed=4)
    cfg = _config(0, "fp16")
    write_zero0_fp16(tmp_path / "ds", run, cfg, {"cur_scale": 512.0, "cur_iter": 5, "last_overflow_iter": 1}, fused)
    r = _convert(tmp_path / "ds", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert os.path.isdir(tmp_path / "out" / "my_tag")
    eng, client = _load(run, cfg, tmp_path / "out")
    with eng:
        _check_loaded(eng, run, client)
        assert eng.loss_scale == 512.0
        _step_and_check(eng, run, seed=13)


# ---- failures: a message naming what is wrong, a nonzero status, nothing written ----

def test_usage_errors_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "deepspeed_c.convert", str(tmp_path), str(tmp_path / "o"), "--fp32"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--fp32 applies to --to-state-dict only" in r.stderr
    with pytest.raises(SystemExit) as e:
        with contextlib.redirect_stderr(io.StringIO()):
            __import__("deepspeed_c.convert.cli").convert.cli.main([str(tmp_path)])  # OUT_DIR missing
    assert e.value.code == 2


def _assert_failed(r, out, status, *needles):
    assert r.returncode == status, (r.returncode, r.stderr)
    for s in needles:
        assert s in r.stderr, r.stderr
    assert not os.path.exists(out)
    assert not [p for p in os.listdir(os.path.dirname(out)) if ".convert-tmp" in p]


def test_missing_rank_file(tmp_path):
    run = Run(SHAPES, "bf16", seed=5)
    write_zero12(tmp_path / "ds", run, _config(2, "bf16"), 3, [list(run.shapes)], 2, LossScaler(1.0))
    os.unlink(tmp_path / "ds" / "global_step5" / "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt")
    _assert_failed(_convert(tmp_path / "ds", tmp_path / "out"), str(tmp_path / "out"), 1, "rank(s) [1]")


def test_truncated_file(tmp_path):
    run = Run(SHAPES, "fp32", seed=6)
    write_zero0_fp32(tmp_path / "ds", run, _config(0))
    path = tmp_path / "ds" / f"global_step{run.global_steps}" / "mp_rank_00_model_states.pt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _assert_failed(_convert(tmp_path / "ds", tmp_path / "out"), str(tmp_path / "out"), 1, str(path))


def test_model_parallel_is_unsupported(tmp_path):
    run = Run(SHAPES, "fp32", seed=10)
    write_zero0_fp32(tmp_path / "ds", run, _config(0))
    tag = tmp_path / "ds" / f"global_step{run.global_steps}"
    torch.save({"module": {}}, tag / "mp_rank_01_model_states.pt")  # a tensor-parallel second shard
    _assert_failed(_convert(tmp_path / "ds", tmp_path / "out"), str(tmp_path / "out"), 3, "model-parallel")


def test_zero3_missing_rank_model_file(tmp_path):
    run = Run(SHAPES, "bf16", seed=11)
    write_zero3(tmp_path / "ds", run, _config(3, "bf16"), 2, [list(run.shapes)])
    os.unlink(tmp_path / "ds" / "global_step5" / "zero_pp_rank_1_mp_rank_00_model_states.pt")
    _assert_failed(_convert(tmp_path / "ds", tmp_path / "out"), str(tmp_path / "out"), 1, "2 optimizer files")


def test_wrong_optimizer_in_config(tmp_path):
    run = Run(SHAPES, "fp32", seed=7)
    write_zero0_fp32(tmp_path / "ds", run, _config(0))
    sgd = _config(0)
    sgd["optimizer"] = {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}
    cfg_path = tmp_path / "sgd.json"
    cfg_path.write_text(__import__("json").dumps(sgd))
    _assert_failed(_convert(tmp_path / "ds", tmp_path / "out", "--config", str(cfg_path)), str(tmp_path / "out"), 1,
                   "exp_avg")


def test_existing_output_tag_is_kept(tmp_path):
    run = Run(SHAPES, "fp32", seed=8)
    write_zero0_fp32(tmp_path / "ds", run, _config(0))
    existing = tmp_path / "out" / f"global_step{run.global_steps}"
    os.makedirs(existing)
    r = _convert(tmp_path / "ds", tmp_path / "out")
    assert r.returncode == 1 and "already exists" in r.stderr
    assert os.listdir(existing) == [] and not os.path.exists(tmp_path / "out" / "latest")
    r = _convert(tmp_path / "ds", tmp_path / "out", "--out-tag", "from_deepspeed")  # beside it
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "latest").read_text() == "from_deepspeed"
    assert os.path.isfile(tmp_path / "out" / "from_deepspeed" / "manifest.json")


def test_output_into_the_source_is_refused(tmp_path):
    run = Run(SHAPES, "fp32", seed=12)
    write_zero0_fp32(tmp_path / "ds", run, _config(0))
    latest = (tmp_path / "ds" / "latest").read_text()
    r = _convert(tmp_path / "ds", tmp_path / "ds", "--out-tag", "converted")
    assert r.returncode == 1 and "is the DeepSpeed checkpoint directory" in r.stderr
    assert (tmp_path / "ds" / "latest").read_text() == latest
    assert not os.path.exists(tmp_path / "ds" / "converted")
    (tmp_path / "file").write_text("x")
    r = _convert(tmp_path / "ds", tmp_path / "file")
    assert r.returncode == 1 and "not a directory" in r.stderr


def test_non_json_client_state(tmp_path):
    run = Run(SHAPES, "fp32", seed=9)
    cfg = _config(0)
    root = tmp_path / "ds"
    write_zero0_fp32(root, run, cfg)
    path = root / f"global_step{run.global_steps}" / "mp_rank_00_model_states.pt"
    sd = torch.load(path, weights_only=False)
    sd["rng"] = {"state": LossScaler(1.0)}  # not JSON
    _save_with_missing_classes(sd, path)
    _assert_failed(_convert(root, tmp_path / "out"), str(tmp_path / "out"), 1, "'rng.state'", "--drop-client-key")
    r = _convert(root, tmp_path / "out", "--drop-client-key", "rng")
    assert r.returncode == 0, r.stderr
