"""Writing a `DsRun` as a deepspeed_c checkpoint.

Route: a one-rank `deepspeed_c.Engine` built from the run's config receives
the weights, fp32 master and optimizer moments through the public API and
saves them (so the data files, their layout and checksums are the
library's own); the state the API cannot set (counters, optimizer step,
schedule index, loss scaler, saved lr/betas) is then written into the
manifest (`manifest_edit`), and the same engine loads the result back as a
check before it is moved into place. Everything is written inside a
temporary directory next to the output and renamed at the end, so a failure
leaves nothing behind.
"""
from __future__ import annotations

import copy
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Optional

from . import manifest_edit
from .ds_reader import DsRun
from .errors import ConvertError


def config_for_one_rank(config: Dict[str, Any], world: int) -> Dict[str, Any]:
    """`config` for a one-rank engine: a train_batch_size that counts `world`
    ranks is replaced by the per-rank micro batch (the batch keys do not
    affect the checkpoint; the resumed run's own config decides them), and
    tensor parallelism is off (a tensor-parallel run's checkpoint holds the
    whole model, docs/CHECKPOINTS.md; the key would refuse a host-driven
    engine)."""
    cfg = copy.deepcopy(config)
    if world > 1 and "train_batch_size" in cfg:
        tb = cfg.pop("train_batch_size")
        if "train_micro_batch_size_per_gpu" not in cfg:
            gas = int(cfg.get("gradient_accumulation_steps", 1) or 1)
            cfg["train_micro_batch_size_per_gpu"] = max(1, int(tb) // (gas * world))
    tp = cfg.get("tensor_parallel")
    if isinstance(tp, dict) and int(tp.get("autotp_size", 0) or 0) > 1:
        tp["autotp_size"] = 0
    return cfg


def _contiguous(t: Any) -> Any:
    return t.detach().contiguous()


def _fill_engine(eng: Any, run: DsRun, progress: Callable[[str], None]) -> None:
    import deepspeed_c as dsc

    for p in run.params:
        eng.add_param(p.name, _contiguous(p.working), trainable=p.trainable)
    eng.init()
    trainable = [p for p in run.params if p.trainable and p.working.numel() > 0]
    every = max(1, len(trainable) // 10)
    for i, p in enumerate(trainable):
        if p.master is not None:
            eng.set_full_fp32_param(p.name, _contiguous(p.master.float()).reshape(p.shape))
        for key, value in p.states.items():
            try:
                eng.set_full_optimizer_state(p.name, key, _contiguous(value.float()).reshape(p.shape))
            except (dsc.NotFoundError, dsc.InvalidArgumentError) as exc:
                raise ConvertError(f"optimizer state '{key}' of parameter '{p.name}' has no counterpart in "
                                   f"this deepspeed_c optimizer ({exc}); check the optimizer in the config "
                                   "(--config)") from exc
        if (i + 1) % every == 0 or i + 1 == len(trainable):
            progress(f"set {i + 1}/{len(trainable)} parameters")
    if run.lr is not None:
        eng.lr = run.lr


def _edit_manifest(path: str, run: DsRun, gas: int, warn: Callable[[str], None]) -> None:
    doc = manifest_edit.read(path)
    c = doc["counters"]
    c["global_steps"] = run.global_steps
    c["global_samples"] = (run.global_samples if run.global_samples is not None
                           else run.global_steps * int(doc["config"].get("train_batch_size", 0) or 0))
    # DeepSpeed does not save micro_steps; at a boundary it is global_steps windows of gas calls.
    c["micro_steps"] = run.global_steps * gas
    c["skipped_steps"] = run.skipped_steps

    opt = doc.get("optimizer")
    if opt is not None:
        opt["step"] = run.optimizer_step if run.optimizer_step is not None else 0
        if run.lr is not None:
            opt["lr"] = run.lr
        if run.betas is not None:
            opt["betas"] = [run.betas[0], run.betas[1]]
        if (run.optimizer_step or 0) > 0:
            for p in run.params:
                if not p.trainable or p.working.numel() == 0:
                    continue
                for n in opt["state_names"]:
                    if n not in p.states:
                        raise ConvertError(f"parameter '{p.name}': the DeepSpeed optimizer state has no '{n}' "
                                           f"although deepspeed_c's {opt['type']} keeps it (has "
                                           f"{sorted(p.states)}): the checkpoint's optimizer is not the "
                                           "config's (--config)")

    sched = doc.get("lr_scheduler")
    state = run.scheduler_state
    if sched is not None:
        if state is None or "last_batch_iteration" not in state:
            raise ConvertError(f"{run.files.model_file}: the config has a {sched['type']} schedule but the "
                               "checkpoint holds no DeepSpeed scheduler state ('lr_scheduler' is "
                               f"{'absent' if state is None else 'a torch scheduler'}); give the run's config "
                               "with --config")
        sched["last_batch_iteration"] = int(state["last_batch_iteration"])
    elif state is not None:
        warn("the checkpoint holds lr_scheduler state but the config has no scheduler: the schedule is not "
             "converted (the saved lr is)")

    ls = doc["loss_scaler"]
    if ls["dynamic"]:
        src = run.loss_scaler
        if src is None or not src.get("dynamic"):
            warn("the config uses a dynamic fp16 loss scale but the checkpoint holds none: the scaler starts "
                 "from the config's initial scale")
        else:
            ls["cur_scale"] = src["cur_scale"]
            ls["cur_iter"] = src["cur_iter"]
            ls["last_overflow_iter"] = src["last_overflow_iter"]
            if src.get("cur_hysteresis") is not None:
                ls["cur_hysteresis"] = src["cur_hysteresis"]
    manifest_edit.write(path, doc)


def _lr_from_schedule(eng: Any, tmp: str, tag: str, manifest: str, warn: Callable[[str], None]) -> None:
    """No lr in the DeepSpeed state (elastic ZeRO checkpoints keep none): the
    schedule's value at the restored index, which a load without optimizer
    state sets, becomes the saved lr."""
    eng.load_checkpoint(tmp, tag, load_optimizer_states=False)
    doc = manifest_edit.read(manifest)
    if doc.get("optimizer") is not None:
        doc["optimizer"]["lr"] = eng.lr
        manifest_edit.write(manifest, doc)
    warn(f"the checkpoint holds no optimizer lr; the schedule's value at the restored index, {eng.lr!r}, is used")


def _commit(tmp_tag_dir: str, out_dir: str, tag: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    os.rename(tmp_tag_dir, os.path.join(out_dir, tag))
    latest_tmp = os.path.join(out_dir, "latest.convert-tmp")
    with open(latest_tmp, "w", encoding="utf-8") as f:
        f.write(tag)
        f.flush()
        os.fsync(f.fileno())
    os.replace(latest_tmp, os.path.join(out_dir, "latest"))
    fd = os.open(out_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(run: DsRun, out_dir: str, config: Dict[str, Any], progress: Callable[[str], None],
          warn: Callable[[str], None], tag: Optional[str] = None) -> str:
    """Write `run` into `out_dir/<tag>` (and `out_dir/latest`); returns the tag directory."""
    import deepspeed_c as dsc

    tag = tag or run.files.tag
    final = os.path.join(out_dir, tag)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConvertError(f"{out_dir}: exists and is not a directory")
    src = os.path.dirname(os.path.realpath(run.files.tag_dir))
    if os.path.realpath(out_dir) in (src, os.path.realpath(run.files.tag_dir)):
        raise ConvertError(f"{out_dir}: is the DeepSpeed checkpoint directory being converted (its 'latest' "
                           "would be replaced); choose another OUT_DIR")
    if os.path.lexists(final):
        raise ConvertError(f"{final} already exists: choose another OUT_DIR or --out-tag")
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent):
        raise ConvertError(f"{parent}: the parent directory of OUT_DIR does not exist")
    cfg = config_for_one_rank(config, run.dp_world_size)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(os.path.abspath(out_dir)) + ".convert-tmp-", dir=parent)
    try:
        try:
            eng = dsc.Engine(cfg)
        except dsc.DeepSpeedError as exc:
            raise ConvertError(f"the run's config does not build a deepspeed_c engine: {exc} (give a config "
                               "deepspeed_c accepts with --config)") from exc
        with eng:
            progress(f"registering {len(run.params)} parameters")
            _fill_engine(eng, run, progress)
            progress(f"saving into {tmp}")
            tag_dir = eng.save_checkpoint(tmp, tag, client_state=run.client_state)
            manifest = os.path.join(tag_dir, "manifest.json")
            _edit_manifest(manifest, run, int(eng.gradient_accumulation_steps), warn)
            if run.lr is None and run.scheduler_state is not None:
                _lr_from_schedule(eng, tmp, tag, manifest, warn)
            progress("verifying: loading the converted checkpoint back")
            eng.load_checkpoint(tmp, tag)
        _commit(tag_dir, out_dir, tag)
    except dsc.DeepSpeedError as exc:
        raise ConvertError(str(exc)) from exc
    except OSError as exc:
        raise ConvertError(f"writing {final}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
