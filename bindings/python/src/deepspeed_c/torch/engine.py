"""``DeepSpeedEngine``: a torch module wrapper over a core ``deepspeed_c.Engine``
that behaves like DeepSpeed's engine in a training loop::

    loss = engine(batch)       # calls the module
    engine.backward(loss)      # loss / gas (x loss scale in fp16), autograd, hooks
    engine.step()              # optimizer + schedule at the accumulation boundary

Gradient flow. Each trainable parameter has a hook (``_binding.GradHooks``)
that hands its gradient to the engine as soon as autograd has produced it and
then sets ``p.grad = None`` (the engine's buffer is the only copy; read it
with ``deepspeed_c.torch.utils.safe_get_full_grad``). The gradients handed
over are those of ``loss / gas x scale`` (DeepSpeed's order), so they go in
``predivided``; the engine only unscales at the step.

PyTorch-style backward (DeepSpeed PR #7665). A plain ``loss.backward()`` or
``out.backward(g)`` on outputs of ``engine(...)`` works too: hooks on the
outputs divide their gradient by ``gradient_accumulation_steps`` (skipped
inside ``engine.backward``, which divides the loss itself), and the end of
the autograd pass runs the engine's backward epilogue (queued with
torch's ``queue_callback``). With fp16 loss scaling the loss must go through
``engine.scale(loss)`` first; a plain backward of an unscaled loss raises
``LossScalingError`` (a ``RuntimeError``) with DeepSpeed's message, before any
gradient reaches the engine.
"""
from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch.autograd import Variable

import deepspeed_c as _dsc

from . import _checkpoint_extras as _extras
from . import _config
from ._binding import GradHooks, attach_parameters, binding_of, detach_parameters
from ._errors import EngineUsageError, LossScalingError, unsupported
from ._moe_groups import GROUP_TAGS, expert_group_params, refuse_sharded_experts
from .optimizer import EngineOptimizer
from .scheduler import EngineLRScheduler

_log = logging.getLogger("deepspeed_c")

# DeepSpeed's text for a direct backward of an unscaled loss (engine._backward_post_hook).
LOSS_SCALING_MESSAGE = ("Loss scaling is required for this configuration, but backward() was called "
                        "directly without scaling the loss. Please use one of the following:"
                        " 1. engine.backward(loss)"
                        " 2. engine.scale(loss).backward()")


def _output_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a (nested) module output: tensor, list, tuple, dict."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _output_tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _output_tensors(item)


def _cast_floats(obj: Any, dtype: torch.dtype) -> Any:
    """Floating tensors in a (nested) input cast to ``dtype`` (fp16.auto_cast)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        cast = [_cast_floats(x, dtype) for x in obj]
        return type(obj)(cast) if not hasattr(obj, "_fields") else type(obj)(*cast)
    if isinstance(obj, dict):
        return type(obj)((k, _cast_floats(v, dtype)) for k, v in obj.items())
    return obj


def _select_trainable(model: torch.nn.Module, model_parameters: Any) -> List[Tuple[str, torch.nn.Parameter, bool]]:
    """[(name, parameter, trainable)] for every parameter of ``model``:
    trainable = requires_grad and (model_parameters is None or listed there)."""
    named = list(model.named_parameters())
    if model_parameters is None:
        return [(n, p, p.requires_grad) for n, p in named]
    if isinstance(model_parameters, dict):   # one group, as DeepSpeed's helpers accept
        model_parameters = [model_parameters]
    chosen = set()
    for i, item in enumerate(list(model_parameters)):
        if isinstance(item, dict):
            extra = sorted(k for k in item if k not in GROUP_TAGS)
            if extra:
                raise unsupported(f"model_parameters group {i} sets {extra}; per-group optimizer "
                                  "settings are not supported (the engine has one set of "
                                  "hyperparameters: put them in the config)")
            params = item.get("params", [])
            params = [params] if isinstance(params, torch.Tensor) else list(params)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], torch.Tensor):
            params = [item[1]]
        else:
            params = [item]
        for p in params:
            if not isinstance(p, torch.Tensor):
                raise TypeError(f"model_parameters entry {i} is a {type(p).__name__}, not a tensor")
            chosen.add(id(p))
    known = {id(p) for _, p in named}
    if not chosen <= known:
        raise ValueError("model_parameters holds tensors that are not parameters of model")
    return [(n, p, p.requires_grad and id(p) in chosen) for n, p in named]


class DeepSpeedEngine(torch.nn.Module):
    """DeepSpeed's engine API over a deepspeed_c engine (see the module docstring).

    Built by ``deepspeed_c.torch.initialize``. ``engine.module`` is the user's
    module (its parameters alias the engine's working weights), ``engine.core``
    the ``deepspeed_c.Engine``, ``engine.optimizer`` / ``engine.lr_scheduler``
    the objects ``initialize`` returns. Attributes the engine lacks are looked
    up on the module, as DeepSpeed's engine does.
    """

    def __init__(self, model: torch.nn.Module, config: Dict[str, Any],
                 model_parameters: Any = None, comm: Any = None) -> None:
        super().__init__()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
        self.module = model
        cfg = config
        self._half = _config.half_dtype(cfg)
        self._zero_stage = _config.zero_stage(cfg)
        fp16 = cfg.get("fp16") if isinstance(cfg.get("fp16"), dict) else {}
        self._fp16_auto_cast = self._half is torch.float16 and fp16.get("auto_cast") is True
        self._in_engine_backward = False
        self._manual_backward_expected = False
        self._epilogue_queued = False
        self._pending_epilogue = False     # gradients arrived since the last core backward()
        self._grads_since_step = False
        self._inside_no_sync = False
        self._global_grad_norm: Optional[float] = None
        self._last_step_info: Optional[Any] = None
        if self._fp16_auto_cast:
            # The adapter casts the inputs itself (forward); the core has no inputs to cast.
            cfg = dict(cfg, fp16={k: v for k, v in fp16.items() if k != "auto_cast"})
        if model_parameters is not None and not isinstance(model_parameters, (list, tuple, dict, torch.Tensor)):
            model_parameters = list(model_parameters)   # a generator is read twice below
        named = _select_trainable(model, model_parameters)
        core = _dsc.Engine(cfg, comm=comm)
        try:
            self.core = core
            refuse_sharded_experts(expert_group_params(model_parameters), core.world_size,
                                   "deepspeed_c.torch.initialize")
            if self._zero_stage == 3 and core.world_size > 1:
                raise unsupported("deepspeed_c.torch: ZeRO stage 3 with more than one rank needs "
                                  "parameter gathering around the forward pass, which the torch "
                                  "adapter does not do yet; use stage 0-2")
            attach_parameters(self, core, named, self._half)
            self._cast_buffers(cfg)
            self._hooks = GradHooks(self._receive_grad)
            trainable = [(n, p) for n, p, t in named if t]
            for n, p in trainable:
                self._hooks.add(n, p)
            # DeepSpeed refuses an unscaled plain backward with dynamic scaling;
            # a static scale other than 1 would be just as wrong, so it is refused too.
            self._needs_scaled_loss = self._half is torch.float16 and (
                fp16.get("loss_scale", 0) == 0 or float(core.loss_scale) != 1.0)
            self.optimizer = (EngineOptimizer(self, [p for _, p in trainable], [n for n, _ in trainable], cfg)
                              if trainable else None)
            sched = cfg.get("scheduler")
            self.lr_scheduler = (EngineLRScheduler(self, str(sched.get("type")))
                                 if isinstance(sched, dict) and sched.get("type") else None)
        except BaseException:
            hooks = self.__dict__.get("_hooks")
            if hooks is not None:
                hooks.remove()
            mine = [p for _, p, _ in named if getattr(binding_of(p), "_owner", lambda: None)() is self]
            detach_parameters(mine)   # torch-owned again, free for another engine
            core.close()
            raise

    # ---- attribute fallback to the module (as DeepSpeed's engine) ----------
    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            modules = self.__dict__.get("_modules")
            module = modules.get("module") if modules else None
            if module is not None and name != "module" and hasattr(module, name):
                return getattr(module, name)
            raise

    def _cast_buffers(self, cfg: Dict[str, Any]) -> None:
        """Buffers stay as they are (DeepSpeed >= 0.18 keeps them), unless
        ``data_types.buffer_dtype`` names a dtype."""
        data_types = cfg.get("data_types") if isinstance(cfg.get("data_types"), dict) else {}
        wanted = data_types.get("buffer_dtype")
        if wanted is None:
            return
        table = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16,
                 "float16": torch.float16, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}
        if wanted not in table:
            raise ValueError(f"data_types.buffer_dtype: {wanted!r} is not one of {sorted(table)}")
        for b in self.module.buffers():
            if b.is_floating_point():
                b.data = b.data.to(table[wanted])

    # ---- forward -------------------------------------------------------------
    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Call the module; hooks on its outputs make a plain ``.backward()``
        divide by ``gradient_accumulation_steps`` as ``engine.backward`` does."""
        if self._fp16_auto_cast:
            inputs = _cast_floats(inputs, torch.float16)
            kwargs = _cast_floats(kwargs, torch.float16)
        out = self.module(*inputs, **kwargs)
        if self.core.gradient_accumulation_steps > 1:
            for t in _output_tensors(out):
                if t.requires_grad:
                    t.register_hook(self._divide_output_grad)
        return out

    def _divide_output_grad(self, grad: torch.Tensor) -> Optional[torch.Tensor]:
        if self._in_engine_backward:
            return None
        return grad / self.core.gradient_accumulation_steps

    # ---- gradients -------------------------------------------------------------
    def _receive_grad(self, name: str, grad: torch.Tensor) -> None:
        if not self._in_engine_backward:
            if self._needs_scaled_loss and not self._manual_backward_expected:
                raise LossScalingError(LOSS_SCALING_MESSAGE)
            if not self._epilogue_queued:
                Variable._execution_engine.queue_callback(self._plain_backward_epilogue)
                self._epilogue_queued = True
        if grad.is_sparse:
            grad = grad.to_dense()
        self.core.accumulate_grad(name, grad.detach(), predivided=True)
        self._pending_epilogue = True
        self._grads_since_step = True

    def _plain_backward_epilogue(self) -> None:
        self._epilogue_queued = False
        self._manual_backward_expected = False
        self._backward_epilogue()

    def _backward_epilogue(self) -> None:
        self.core.backward()
        self._pending_epilogue = False

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss`` times the current loss scale, for a manual ``.backward()``
        (``engine.scale(loss).backward()``); the division by
        ``gradient_accumulation_steps`` happens in the hooks on the outputs of
        ``engine(...)``. ``loss`` must be a scalar tensor with ``grad_fn``."""
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.grad_fn is not None):
            raise ValueError("loss must be a scalar tensor with grad_fn. For non-scalar tensors, "
                             "use tensor.backward(grad)")
        self._manual_backward_expected = True
        scale = float(self.core.loss_scale)
        return loss * scale if scale != 1.0 else loss

    def backward(self, loss: torch.Tensor, retain_graph: bool = False, scale_wrt_gas: bool = True,
                 gradient: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Backward of ``loss`` (DeepSpeed's ``engine.backward``).

        The loss is divided by ``gradient_accumulation_steps`` (when
        ``scale_wrt_gas``) and then multiplied by the fp16 loss scale, autograd
        runs (``retain_graph`` as torch's), the hooks hand the gradients to the
        engine, then the engine's backward epilogue runs (gradient reduction).
        ``gradient``: for a non-scalar ``loss`` (an output tensor), the gradient
        of the objective w.r.t. it, as ``tensor.backward(gradient)``.
        Returns ``loss / gas`` (``loss`` when not ``scale_wrt_gas``)."""
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"backward: loss must be a tensor, not {type(loss).__name__}")
        if gradient is None and loss.numel() != 1:
            raise ValueError("loss must be a scalar tensor. If you need to pass output gradients, "
                             "use engine.backward(out, gradient=g) or out.backward(g)")
        if not loss.requires_grad:
            raise ValueError("backward: loss does not require grad (no parameter of the module "
                             "reached it, or it was computed under no_grad)")
        if self._in_engine_backward:
            raise EngineUsageError("engine.backward() is not re-entrant")
        gas = self.core.gradient_accumulation_steps
        scale = float(self.core.loss_scale)
        self._in_engine_backward = True
        try:
            if gradient is None:
                scaled = loss / gas if scale_wrt_gas else loss
                returned = scaled
                if scale != 1.0:
                    scaled = scaled * scale
                scaled.backward(retain_graph=retain_graph)
            else:
                g = gradient / gas if scale_wrt_gas else gradient
                if scale != 1.0:
                    g = g * scale
                returned = loss.detach() / gas if scale_wrt_gas else loss.detach()
                torch.autograd.backward(loss, grad_tensors=g, retain_graph=retain_graph)
            self._backward_epilogue()
        finally:
            self._in_engine_backward = False
        return returned

    # ---- step --------------------------------------------------------------------
    def step(self, lr_kwargs: Optional[Dict[str, Any]] = None) -> None:
        """DeepSpeed's ``engine.step()``: at the accumulation boundary the
        optimizer step (overflow check, unscale, clip, update, LR schedule);
        otherwise only the micro-step count. ``lr_kwargs`` must be empty."""
        if lr_kwargs:
            raise unsupported(f"step(lr_kwargs={lr_kwargs!r}): the engine's schedule takes no arguments")
        if self._inside_no_sync:
            raise EngineUsageError("It is illegal to call Engine.step() inside no_sync context manager")
        if self._pending_epilogue:   # a backward whose end the autograd callback did not reach
            self._backward_epilogue()
        self._epilogue_queued = False          # no autograd pass is running now
        self._manual_backward_expected = False  # engine.scale() covers one micro-step
        info = self.core.step()
        self._last_step_info = info
        if info.stepped:
            self._grads_since_step = False
            if not info.skipped:
                self._global_grad_norm = float(info.grad_norm)

    def zero_grad(self, set_to_none: bool = True) -> None:  # type: ignore[override]
        """Drop the gradients accumulated since the last boundary step."""
        if not self._grads_since_step:
            return
        for name, p in self.module.named_parameters():
            if p.requires_grad and self.optimizer is not None and name in self.optimizer._names:
                self.core.set_full_grad(name, torch.zeros(p.shape, dtype=torch.float32))
        self._grads_since_step = False

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Accumulate gradients without cross-rank reduction (DeepSpeed's rules:
        refused at ZeRO stage 2/3, not re-entrant, ``step()`` inside raises).
        Below stage 2 this engine reduces only at the boundary step anyway, so
        backward inside the block simply accumulates."""
        if self._zero_stage >= 2:
            raise EngineUsageError("no_sync context manager is incompatible with gradient "
                                   f"partitioning logic of ZeRO stage {self._zero_stage}")
        if self._inside_no_sync:
            raise EngineUsageError("no_sync context manager reentry is unsupported")
        self._inside_no_sync = True
        try:
            yield
        finally:
            self._inside_no_sync = False

    # ---- checkpoints ---------------------------------------------------------------
    def save_checkpoint(self, save_dir: str, tag: Optional[str] = None,
                        client_state: Optional[Any] = None, save_latest: bool = True,
                        exclude_frozen_parameters: bool = False) -> str:
        """Save weights, optimizer and schedule state, counters and
        ``client_state`` under ``save_dir/tag`` (tag default ``global_step<N>``)
        and update ``latest``. ``client_state`` may be any picklable object:
        a JSON-able one is stored in the core's manifest, another (tensors, ...)
        in a torch file beside it together with the module's buffers.
        Returns the tag directory (DeepSpeed returns True; a path is truthy)."""
        if not save_latest:
            raise unsupported("save_checkpoint(save_latest=False) is not supported")
        if exclude_frozen_parameters:
            raise unsupported("save_checkpoint(exclude_frozen_parameters=True) is not supported")
        manifest_state, pickled = _extras.split_client_state({} if client_state is None else client_state)
        path = self.core.save_checkpoint(save_dir, tag=tag, client_state=manifest_state)
        if self.core.rank == 0:
            _extras.write_extras(path, _extras.persistent_buffers(self.module), pickled)
        return path

    def load_checkpoint(self, load_dir: str, tag: Optional[str] = None, load_module_strict: bool = True,
                        load_optimizer_states: bool = True, load_lr_scheduler_states: bool = True,
                        load_module_only: bool = False, custom_load_fn: Any = None
                        ) -> Tuple[Optional[str], Any]:
        """Load a checkpoint saved by ``save_checkpoint`` (tag default: the
        ``latest`` file). The module's parameters keep aliasing the engine, so
        they show the loaded weights. Returns ``(path, client_state)``; as
        DeepSpeed, ``(None, None)`` with a warning when there is no ``latest``
        file (tag None) or no such tag directory."""
        if custom_load_fn is not None:
            raise unsupported("load_checkpoint(custom_load_fn=...) is not supported")
        load_dir = os.fspath(load_dir)
        if tag is None and not os.path.isfile(os.path.join(load_dir, "latest")):
            _log.warning("Unable to find latest file at %s, if trying to load latest checkpoint please "
                         "ensure this file exists or pass an explicit checkpoint tag when loading a "
                         "checkpoint.", os.path.join(load_dir, "latest"))
            return None, None
        if tag is not None and not os.path.isdir(os.path.join(load_dir, str(tag))):
            _log.warning("Client provided checkpoint load path: %s does not exist ... skip loading "
                         "checkpoint", os.path.join(load_dir, str(tag)))
            return None, None
        path, client_state = self.core.load_checkpoint(
            load_dir, tag=tag, load_optimizer_states=load_optimizer_states,
            load_lr_scheduler_states=load_lr_scheduler_states, load_module_only=load_module_only,
            load_module_strict=load_module_strict)
        client_state = _extras.read_extras(path, client_state, self.module, load_module_strict)
        self._pending_epilogue = False
        self._grads_since_step = False
        return path, client_state

    # ---- DeepSpeed's getters -------------------------------------------------------
    def get_lr(self) -> List[float]:
        """``[lr]``: the learning rate of the next optimizer step."""
        return [float(self.core.lr)]

    def get_global_grad_norm(self) -> Optional[float]:
        """The unscaled global gradient norm of the last applied step (None before one)."""
        return self._global_grad_norm

    def was_step_applied(self) -> bool:
        """Whether the last ``step()`` ran the optimizer (a boundary, not skipped)."""
        info = self._last_step_info
        return bool(info is not None and info.stepped and not info.skipped)

    def is_gradient_accumulation_boundary(self) -> bool:
        """Whether the next ``step()`` is an optimizer step."""
        return bool(self.core.is_gradient_accumulation_boundary())

    def set_gradient_accumulation_boundary(self, is_boundary: bool) -> None:
        """Force the boundary decision (persists until set again), as DeepSpeed."""
        self.core.set_gradient_accumulation_boundary(bool(is_boundary))

    def gradient_accumulation_steps(self) -> int:
        """``gradient_accumulation_steps`` of the resolved config."""
        return int(self.core.gradient_accumulation_steps)

    def train_micro_batch_size_per_gpu(self) -> int:
        """``train_micro_batch_size_per_gpu`` of the resolved config."""
        return int(self.core.train_micro_batch_size_per_gpu)

    def train_batch_size(self) -> int:
        """``train_batch_size`` of the resolved config."""
        return int(self.core.train_batch_size)

    def fp16_enabled(self) -> bool:
        """Whether fp16 mixed precision is on."""
        return self._half is torch.float16

    def bfloat16_enabled(self) -> bool:
        """Whether bf16 mixed precision is on."""
        return self._half is torch.bfloat16

    def zero_optimization_stage(self) -> int:
        """The ZeRO stage of the config."""
        return self._zero_stage

    @property
    def global_steps(self) -> int:
        """Optimizer boundaries passed, skipped ones included."""
        return int(self.core.global_steps)

    @property
    def global_samples(self) -> int:
        """Samples consumed."""
        return int(self.core.global_samples)

    @property
    def skipped_steps(self) -> int:
        """Boundaries whose step was skipped for fp16 overflow."""
        return int(self.core.skipped_steps)

    @property
    def micro_steps(self) -> int:
        """``step()`` calls so far."""
        return int(self.core.micro_steps)

    @property
    def global_rank(self) -> int:
        """This process's rank."""
        return int(self.core.rank)

    @property
    def world_size(self) -> int:
        """The number of ranks."""
        return int(self.core.world_size)

    @property
    def dp_world_size(self) -> int:
        """The data-parallel world size (= world_size)."""
        return int(self.core.world_size)

    def offload_states(self, include: Any = None, device: Any = "cpu", pin_memory: bool = True,
                       non_blocking: bool = False, *, nvme_path: Optional[str] = None) -> None:
        """DeepSpeed's engine.offload_states (deepspeed_c.Engine.offload_states; nvme_path
        None = the config's). The engine's calls that need an offloaded state raise
        until reload_states(); the module's parameters alias the working weights (their
        storage stays valid): with "lp_params" out, do not run the module's forward."""
        self.core.offload_states(include, device, pin_memory, non_blocking, nvme_path=nvme_path)

    def reload_states(self, non_blocking: bool = False) -> None:
        """DeepSpeed's engine.reload_states: every offloaded state back, bit-identical."""
        self.core.reload_states(non_blocking)

    def empty_partition_cache(self) -> None:
        """DeepSpeed's engine.empty_partition_cache (ZeRO-3; a no-op below)."""
        self.core.empty_partition_cache()

    def destroy(self) -> None:
        """Release the engine; the module keeps its current weights as torch-owned
        tensors and collects ``p.grad`` again as a plain module."""
        self._hooks.remove()
        detach_parameters(list(self.module.parameters()))
        self.core.close()
