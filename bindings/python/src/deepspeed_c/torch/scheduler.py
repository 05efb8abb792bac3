"""The LR scheduler object ``deepspeed_c.torch.initialize`` returns.

The engine owns the schedule of the config's ``scheduler`` section and
advances it once per applied optimizer step (never on a step skipped for
fp16 overflow), as DeepSpeed's engine calls ``lr_scheduler.step()``. This
object reports that schedule the way DeepSpeed's scheduler objects do when
the engine steps them:

* ``get_lr()`` / ``get_last_lr()``: a list with the learning rate the next
  optimizer step uses; ``get_last_lr()`` refuses before the first applied step
  (DeepSpeed asserts ``step()`` was called).
* ``last_batch_iteration``: applied steps - 1 (-1 before the first).
* ``state_dict()``: ``{"last_batch_iteration": n}``; the schedule itself is
  saved and restored by ``engine.save_checkpoint`` / ``load_checkpoint``.
* ``step()`` is refused: a second driver would advance the schedule twice.
"""
from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional

from ._errors import EngineUsageError, unsupported


class EngineLRScheduler:
    """A read-only view of the engine's LR schedule (see the module docstring)."""

    def __init__(self, engine: Any, scheduler_type: str) -> None:
        self._engine_ref = weakref.ref(engine)
        self.scheduler_type = scheduler_type

    def _core(self) -> Any:
        engine = self._engine_ref()
        if engine is None:
            raise EngineUsageError("the engine of this LR scheduler is gone")
        return engine.core

    @property
    def last_batch_iteration(self) -> int:
        """Applied (not skipped) optimizer steps minus one."""
        core = self._core()
        return int(core.global_steps) - int(core.skipped_steps) - 1

    def get_lr(self) -> List[float]:
        """``[lr]``: the learning rate the next optimizer step uses."""
        return [float(self._core().lr)]

    def get_last_lr(self) -> List[float]:
        """``[lr]`` as set by the last schedule step; refused before the first."""
        if self.last_batch_iteration < 0:
            raise EngineUsageError("need to call step() first")
        return [float(self._core().lr)]

    def step(self, last_batch_iteration: Optional[int] = None, **kwargs: Any) -> None:
        """Refused: ``engine.step()`` advances the schedule."""
        raise unsupported("lr_scheduler.step(): the deepspeed_c engine advances its LR schedule "
                          "in engine.step(); do not step it again")

    def state_dict(self) -> Dict[str, int]:
        """``{"last_batch_iteration": n}`` as DeepSpeed's schedulers."""
        return {"last_batch_iteration": self.last_batch_iteration}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Accepted only when it matches the engine's position (restore the
        schedule with ``engine.load_checkpoint``)."""
        wanted = state_dict.get("last_batch_iteration")
        if wanted != self.last_batch_iteration:
            raise unsupported("lr_scheduler.load_state_dict: the schedule's position is restored "
                              "by engine.load_checkpoint (state dict says "
                              f"{wanted!r}, the engine is at {self.last_batch_iteration})")

    def __repr__(self) -> str:
        return f"EngineLRScheduler(type={self.scheduler_type!r})"
