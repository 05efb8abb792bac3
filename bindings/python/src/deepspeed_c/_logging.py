"""Library messages go to Python's logging, logger ``deepspeed_c``."""
from __future__ import annotations

import atexit
import logging

from ._native import ll

logger = logging.getLogger("deepspeed_c")

_LEVELS = {
    ll.DS_LOG_ERROR: logging.ERROR,
    ll.DS_LOG_WARN: logging.WARNING,
    ll.DS_LOG_INFO: logging.INFO,
    ll.DS_LOG_DEBUG: logging.DEBUG,
}

# The library filters by its own level first (DS_LOG_LEVEL, default warn, or
# Engine(log_level=...)); what passes is handed to the logger here.
LOG_OFF = ll.DS_LOG_OFF
LOG_ERROR = ll.DS_LOG_ERROR
LOG_WARN = ll.DS_LOG_WARN
LOG_INFO = ll.DS_LOG_INFO
LOG_DEBUG = ll.DS_LOG_DEBUG


def _sink(level: int, message: str) -> None:
    logger.log(_LEVELS.get(level, logging.WARNING), "%s", message)


def install() -> None:
    ll.set_log_sink(_sink)


def _uninstall() -> None:
    # After interpreter shutdown starts, a message from a destructor or a
    # watchdog thread must not call into Python.
    try:
        ll.set_log_sink(None)
    except Exception:  # pragma: no cover
        pass


install()
atexit.register(_uninstall)
