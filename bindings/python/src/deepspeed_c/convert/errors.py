"""Errors of the checkpoint converter and the exit status each maps to."""
from __future__ import annotations


class ConvertError(Exception):
    """A checkpoint could not be converted; the message names the file or key."""

    exit_code = 1


class UnsupportedCheckpointError(ConvertError, NotImplementedError):
    """A DeepSpeed checkpoint layout this converter does not read (e.g. tensor parallelism)."""

    exit_code = 3
