"""deepspeed_c.torch: DeepSpeed's PyTorch entry points over the deepspeed_c library.

A DeepSpeed training script runs unchanged but for its import line::

    import deepspeed_c.torch as deepspeed
    engine, optimizer, _, lr_scheduler = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config)
    for batch in data:
        loss = engine(batch)
        engine.backward(loss)
        engine.step()

``Optimizer(params, config)`` embeds the engine as a ``torch.optim.Optimizer``
instead; ``deepspeed_c.torch.utils`` has the ``safe_get_full_*`` accessors.

Differences from DeepSpeed:

* CPU modules only (the engine's memory is host memory); ZeRO stage 3 only in
  a world of one (several ranks raise ``UnsupportedError``).
* After backward ``p.grad`` is None: each gradient is handed to the engine as
  autograd produces it; read it with ``utils.safe_get_full_grad(p)``.
* The engine owns the optimizer and the LR schedule: a client optimizer or
  scheduler object, per-group hyperparameters, ``lr_scheduler.step()`` and
  ``optimizer.step()`` are refused (``UnsupportedError``).
* ``tensor.backward()`` after ``engine.scale(loss)`` works at every ZeRO stage
  (DeepSpeed: ZeRO 1-3); an unscaled one raises ``LossScalingError`` when fp16
  uses a loss scale other than 1 (DeepSpeed: only with dynamic scaling), before
  any gradient reaches the engine.
* ``get_global_grad_norm()`` is the norm of the last applied step also in fp32
  at ZeRO 0 (DeepSpeed returns None there).
* ``save_checkpoint`` returns the tag directory (DeepSpeed: True); a
  non-JSON ``client_state`` and the module's buffers are kept in a torch file
  beside the engine's checkpoint files.
* Writing to ``p.data`` in place writes the working copy only (in fp16/bf16
  mode the fp32 master wins at the next step): use ``safe_set_full_fp32_param``.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from . import utils
from ._config import ConfigLike, load_config
from ._errors import EngineUsageError, LossScalingError, unsupported_arguments
from .engine import DeepSpeedEngine
from .optimizer import EngineOptimizer, Optimizer
from .scheduler import EngineLRScheduler

_TORCH_DISTRIBUTED_DEFAULT_PORT = 29500  # deepspeed.initialize's default distributed_port

__all__ = ["initialize", "DeepSpeedEngine", "Optimizer", "EngineOptimizer", "EngineLRScheduler",
           "EngineUsageError", "LossScalingError", "utils"]


def initialize(args: Any = None, model: Optional[torch.nn.Module] = None, optimizer: Any = None,
               model_parameters: Any = None, training_data: Any = None, lr_scheduler: Any = None,
               distributed_port: Optional[int] = None, mpu: Any = None, dist_init_required: Optional[bool] = None,
               collate_fn: Any = None, config: Optional[ConfigLike] = None, mesh_param: Any = None,
               config_params: Optional[ConfigLike] = None, comm: Any = None
               ) -> Tuple[DeepSpeedEngine, Optional[EngineOptimizer], None, Optional[EngineLRScheduler]]:
    """``deepspeed.initialize`` over a deepspeed_c engine.

    ``model``: a CPU ``torch.nn.Module``; its parameters are registered with
    the engine under their ``named_parameters()`` names (frozen ones as not
    trainable) and become zero-copy views of the engine's working weights
    (fp16/bf16 when that mode is on, as DeepSpeed casts the module).
    ``model_parameters``: None (all parameters), parameters, or param-group
    dicts without per-group settings; parameters left out are frozen.
    ``config`` (or its alias ``config_params``, or ``args.deepspeed_config``):
    a dict, JSON text or JSON file path; it must hold the ``optimizer`` section
    (and ``scheduler`` for a schedule). ``comm``: None (the world of the
    launcher, or one rank), a ``deepspeed_c.Comm`` or an mpi4py communicator.

    Returns ``(engine, optimizer, None, lr_scheduler)``: the optimizer and
    scheduler report the engine's state; ``lr_scheduler`` is None without a
    ``scheduler`` section. A client optimizer or scheduler object,
    ``training_data``, ``collate_fn``, ``mpu``, ``mesh_param``, a
    ``distributed_port`` other than DeepSpeed's default 29500, or
    ``dist_init_required=False`` raise ``UnsupportedError`` naming them.
    """
    refused = {name for name, value in (("optimizer", optimizer), ("lr_scheduler", lr_scheduler),
                                        ("training_data", training_data), ("collate_fn", collate_fn),
                                        ("mpu", mpu), ("mesh_param", mesh_param)) if value is not None}
    if distributed_port not in (None, _TORCH_DISTRIBUTED_DEFAULT_PORT):
        refused.add("distributed_port")  # the world comes from the launcher, not a torch rendezvous
    if dist_init_required is False:
        refused.add("dist_init_required=False")
    if refused:
        raise unsupported_arguments("deepspeed_c.torch.initialize", refused)
    if model is None:
        raise ValueError("deepspeed_c.torch.initialize: model is required")
    if config is not None and config_params is not None:
        raise ValueError("deepspeed_c.torch.initialize: give config or config_params, not both")
    source = config if config is not None else config_params
    if source is None and args is not None:
        source = getattr(args, "deepspeed_config", None)
    if source is None:
        raise ValueError("deepspeed_c.torch.initialize: a config is required (config=, "
                         "config_params= or args.deepspeed_config)")
    engine = DeepSpeedEngine(model, load_config(source), model_parameters=model_parameters, comm=comm)
    return engine, engine.optimizer, None, engine.lr_scheduler
