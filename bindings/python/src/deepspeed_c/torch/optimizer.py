"""torch.optim.Optimizer objects backed by a core ``deepspeed_c.Engine``.

* ``Optimizer(params, config)``: a drop-in ``torch.optim.Optimizer`` whose
  ``step()`` hands every ``p.grad`` to its own engine and runs the engine's
  backward + step (optimizer, clipping, LR schedule of the DeepSpeed config),
  for loops that own their optimizer (Lightning, the Hugging Face Trainer's
  ``optimizers=(opt, sched)``, a plain loop).
* ``EngineOptimizer``: what ``deepspeed_c.torch.initialize`` returns as its
  optimizer (DeepSpeed returns its optimizer wrapper there): ``param_groups``,
  ``cur_scale``/``loss_scale``, ``state_dict()``; the step itself is
  ``engine.step()``.

``param_groups[0]["lr"]`` reads the engine's learning rate; writing it sets
the engine's learning rate for the next step (a config ``scheduler``
overrides it again at its next step, as DeepSpeed's would).
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

import deepspeed_c as _dsc

from . import _config
from ._binding import attach_parameters, detach_parameters
from ._errors import unsupported
from ._moe_groups import GROUP_TAGS, expert_group_params, refuse_sharded_experts


class _LiveParamGroup(dict):
    """A torch param group whose ``"lr"`` entry is the engine's learning rate."""

    def __init__(self, group: Dict[str, Any], owner: Any) -> None:
        super().__init__(group)
        self._owner = weakref.ref(owner)

    def _core(self) -> Optional[Any]:
        owner = self._owner()
        core = getattr(owner, "core", None) if owner is not None else None
        if core is None or core.closed:
            return None
        return core

    def __getitem__(self, key: str) -> Any:
        if key == "lr":
            core = self._core()
            if core is not None:
                dict.__setitem__(self, "lr", core.lr)
        return dict.__getitem__(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "lr":
            core = self._core()
            if core is not None:
                core.lr = float(value)
        dict.__setitem__(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[key] if key in self else default

    def __reduce_ex__(self, protocol: Any) -> Any:  # pickles / deep-copies as a plain dict
        return (dict, (dict(self),))


class _EngineBackedOptimizer(torch.optim.Optimizer):
    """Shared part: param groups over the engine, loss scale, state dicts."""

    core: Any

    def _setup(self, names: Sequence[str], cfg: Dict[str, Any]) -> None:
        self._names: List[str] = list(names)
        self._state_keys = _config.state_keys(cfg)
        self.param_groups = [_LiveParamGroup(g, self) for g in self.param_groups]

    def _params(self) -> List[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    @property
    def cur_scale(self) -> float:
        """The current loss scale (1.0 unless fp16), as DeepSpeed's ``optimizer.cur_scale``."""
        return float(self.core.loss_scale)

    @property
    def loss_scale(self) -> float:
        """Same as ``cur_scale`` (DeepSpeed's ``optimizer.loss_scale``)."""
        return float(self.core.loss_scale)

    def state_dict(self) -> Dict[str, Any]:
        """torch's format: ``{"state": {index: {key: fp32 tensor}}, "param_groups": [...]}``,
        the state read from the engine (exp_avg/exp_avg_sq for Adam-like
        optimizers, exp_avg for Lion, momentum_buffer for SGD), indices in
        ``param_groups`` order. The per-step counters the engine keeps (bias
        correction) are not part of it: use the engine's checkpoints for an
        exact resume."""
        state: Dict[int, Dict[str, torch.Tensor]] = {}
        for i, (name, p) in enumerate(zip(self._names, self._params())):
            if not p.requires_grad:
                continue
            entry = {}
            for key in self._state_keys:
                try:
                    entry[key] = torch.from_numpy(self.core.get_full_optimizer_state(name, key).copy())
                except (_dsc.NotFoundError, _dsc.UnsupportedError):
                    continue
            if entry:
                state[i] = entry
        groups = []
        start = 0
        for g in self.param_groups:
            n = len(g["params"])
            packed = {k: v for k, v in dict(g).items() if k != "params"}
            packed["lr"] = g["lr"]
            packed["params"] = list(range(start, start + n))
            groups.append(packed)
            start += n
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Write ``state_dict()``'s optimizer state into the engine and take
        ``lr`` from its first param group."""
        groups = state_dict.get("param_groups")
        if not isinstance(groups, list) or len(groups) != len(self.param_groups):
            raise ValueError("load_state_dict: the state dict's param_groups do not match this "
                             f"optimizer's ({len(self.param_groups)} group(s))")
        count = sum(len(g.get("params", ())) for g in groups)
        if count != len(self._names):
            raise ValueError(f"load_state_dict: the state dict holds {count} parameters, this "
                             f"optimizer {len(self._names)}")
        for index, entry in (state_dict.get("state") or {}).items():
            i = int(index)
            if not 0 <= i < len(self._names):
                raise ValueError(f"load_state_dict: state index {i} out of range")
            for key, value in entry.items():
                if key in self._state_keys:
                    self.core.set_full_optimizer_state(self._names[i], key,
                                                       torch.as_tensor(value).detach().float().contiguous())
        if "lr" in groups[0]:
            self.param_groups[0]["lr"] = groups[0]["lr"]


class Optimizer(_EngineBackedOptimizer):
    """A ``torch.optim.Optimizer`` that runs a deepspeed_c engine.

    ``params``: an iterable of parameters, of ``(name, parameter)`` pairs
    (``model.named_parameters()``: the names then name the checkpoint's
    entries), or one param-group dict. Several param groups are accepted only
    when their settings equal the config's (the engine has one set of
    hyperparameters). ``config``: a DeepSpeed config (dict, JSON text or path)
    with an ``optimizer`` section; ``gradient_accumulation_steps`` must be 1
    (every ``step()`` is an optimizer step: accumulate in your loop); when no
    batch size is given ``train_micro_batch_size_per_gpu`` defaults to 1.

    The parameters become zero-copy views of the engine's working weights
    (bf16 in bf16 mode). ``step()`` hands each ``p.grad`` to the engine (as
    the gradient of the loss: divide by your accumulation count yourself),
    then runs the engine's backward and step: clipping, the optimizer and the
    config's LR schedule. fp16 works only through ``scale_loss``:
    ``opt.scale_loss(loss).backward(); opt.step()``; otherwise ``step()``
    raises ``UnsupportedError``. Parameters without a gradient at ``step()``
    are still updated with a zero gradient (weight decay, moments), unlike
    torch's optimizers which skip them.
    """

    def __init__(self, params: Iterable[Any], config: _config.ConfigLike, *,
                 comm: Any = None) -> None:
        cfg = _config.load_config(config)
        gas = cfg.get("gradient_accumulation_steps", 1)
        if gas != 1:
            raise unsupported("deepspeed_c.torch.Optimizer: gradient_accumulation_steps must be 1 "
                              f"(got {gas!r}); every step() is an optimizer step, so accumulate "
                              "gradients in the training loop")
        if not any(k in cfg for k in ("train_batch_size", "train_micro_batch_size_per_gpu")):
            cfg["train_micro_batch_size_per_gpu"] = 1
        names, groups = _split_params(params)
        defaults = _config.optimizer_params(cfg)
        defaults.setdefault("lr", 1e-3)
        super().__init__(groups, defaults)
        _check_groups(self.param_groups, defaults)
        flat = [p for g in self.param_groups for p in g["params"]]
        if names is None:
            names = [f"param.{i}" for i in range(len(flat))]
        self._half = _config.half_dtype(cfg)
        self._fp16 = self._half is torch.float16
        self._loss_scaled = False
        self.last_step_info: Optional[Any] = None
        core = _dsc.Engine(cfg, comm=comm)
        try:
            self.core = core
            refuse_sharded_experts(expert_group_params(self.param_groups), core.world_size,
                                   "deepspeed_c.torch.Optimizer")
            attach_parameters(self, core, [(n, p, p.requires_grad) for n, p in zip(names, flat)],
                              self._half)
        except BaseException:
            core.close()
            raise
        self._setup(names, cfg)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss`` times the current loss scale (fp16 training: call
        ``.backward()`` on the result; a no-op factor of 1 otherwise)."""
        self._loss_scaled = True
        return loss * self.core.loss_scale

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:  # type: ignore[override]
        """Hand every ``p.grad`` to the engine and run one optimizer step.

        Returns what ``closure`` returned (None without one). The step's
        details (skipped, grad norm, lr) are in ``last_step_info``."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._fp16 and not self._loss_scaled:
            raise unsupported("deepspeed_c.torch.Optimizer with fp16 needs a scaled loss: "
                              "call opt.scale_loss(loss).backward() before opt.step()")
        for name, p in zip(self._names, self._params()):
            if p.requires_grad and p.grad is not None:
                grad = p.grad.detach()
                if grad.is_sparse:
                    grad = grad.to_dense()
                self.core.accumulate_grad(name, grad, predivided=True)
        self.core.backward()
        self.last_step_info = self.core.step()
        self._loss_scaled = False
        return loss

    def close(self) -> None:
        """Release the engine (the parameters keep their current values as
        torch-owned copies)."""
        detach_parameters(self._params())
        self.core.close()


class EngineOptimizer(_EngineBackedOptimizer):
    """The optimizer ``deepspeed_c.torch.initialize`` returns; the engine steps it.

    ``zero_grad()`` clears gradients accumulated since the last step;
    ``step()`` is refused (call ``engine.step()``)."""

    def __init__(self, engine: Any, params: List[torch.Tensor], names: List[str],
                 cfg: Dict[str, Any]) -> None:
        defaults = _config.optimizer_params(cfg)
        defaults.setdefault("lr", 0.0)
        self._engine_ref = weakref.ref(engine)
        super().__init__(params, defaults)
        self._setup(names, cfg)

    @property
    def core(self) -> Any:  # type: ignore[override]
        """The engine's core ``deepspeed_c.Engine``."""
        engine = self._engine_ref()
        if engine is None:
            raise _dsc.InvalidStateError(3, "the engine of this optimizer is gone")
        return engine.core

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:  # type: ignore[override]
        """Refused: the engine owns the step (``engine.step()``)."""
        raise unsupported("optimizer.step(): call engine.step() (the deepspeed_c engine runs "
                          "the optimizer at the gradient accumulation boundary)")

    def zero_grad(self, set_to_none: bool = True) -> None:  # type: ignore[override]
        """Clear the gradients accumulated since the last ``engine.step()``."""
        engine = self._engine_ref()
        if engine is not None:
            engine.zero_grad()


def _split_params(params: Iterable[Any]) -> Tuple[Optional[List[str]], List[Any]]:
    items = list(params)
    if items and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in items):
        return [x[0] for x in items], [x[1] for x in items]
    return None, items


def _check_groups(groups: List[Dict[str, Any]], defaults: Dict[str, Any]) -> None:
    for i, g in enumerate(groups):
        for key, value in g.items():
            if key in GROUP_TAGS:   # "name" / "moe": DeepSpeed's MoE group tags
                continue
            if key not in defaults:
                raise unsupported(f"param group {i}: {key!r} is not a setting of the config's "
                                  "optimizer; the engine has one set of optimizer "
                                  "hyperparameters (per-group settings are not supported)")
            if value != defaults[key]:
                raise unsupported(f"param group {i}: {key}={value!r} differs from the config's "
                                  f"{defaults[key]!r}; the engine has one set of optimizer "
                                  "hyperparameters (per-group settings are not supported)")
