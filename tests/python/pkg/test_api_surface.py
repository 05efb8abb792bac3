"""Every public name of the package has a docstring and type hints (py.typed ships)."""
from __future__ import annotations

import importlib
import inspect
import os

import pytest

import deepspeed_c

MODULES = ["deepspeed_c", "deepspeed_c.engine", "deepspeed_c.view", "deepspeed_c.comm",
           "deepspeed_c.errors", "deepspeed_c.torch", "deepspeed_c.torch.utils", "deepspeed_c.convert",
           "deepspeed_c.pipe", "deepspeed_c.offload"]


def _public_members(mod):
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    for name in names:
        obj = getattr(mod, name)
        if inspect.ismodule(obj) or not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        owner = getattr(obj, "__module__", "")
        if owner.split(".")[0] != "deepspeed_c":
            continue   # re-exported from elsewhere (typing, dataclasses, torch)
        if not hasattr(mod, "__all__") and owner != mod.__name__:
            continue   # imported from another module of the package: checked there
        yield name, obj
        if inspect.isclass(obj):
            for mname, m in vars(obj).items():
                if mname.startswith("_") or not (inspect.isfunction(m) or isinstance(m, property)):
                    continue
                yield f"{name}.{mname}", m


@pytest.mark.parametrize("modname", MODULES)
def test_public_names_are_documented_and_typed(modname):
    try:
        mod = importlib.import_module(modname)
    except ImportError as exc:
        if "torch" in str(exc) and "deepspeed_c" not in str(exc):
            pytest.skip(f"{modname} needs torch: {exc}")
        raise
    undocumented, untyped = [], []
    for name, obj in _public_members(mod):
        fn = obj.fget if isinstance(obj, property) else obj
        if not (inspect.getdoc(fn) or (isinstance(obj, property) and inspect.getdoc(obj))):
            # a property's or dataclass's documentation may live on the class
            if not inspect.isclass(obj):
                undocumented.append(name)
        if inspect.isfunction(fn):
            sig = inspect.signature(fn)
            params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
            if any(p.annotation is inspect.Parameter.empty for p in params
                   if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)) or \
               sig.return_annotation is inspect.Signature.empty:
                untyped.append(name)
        elif inspect.isclass(obj) and not inspect.getdoc(obj):
            undocumented.append(name)
    assert not undocumented, f"{modname}: no docstring: {undocumented}"
    assert not untyped, f"{modname}: missing type hints: {untyped}"


def test_py_typed_ships():
    assert os.path.exists(os.path.join(os.path.dirname(deepspeed_c.__file__), "py.typed"))
