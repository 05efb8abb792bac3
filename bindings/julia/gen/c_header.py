"""Read include/deepspeed_c.h (the umbrella header and the sub-headers of
include/deepspeed_c/ it includes, in its order) with a real C parser
(pycparser) after the C preprocessor, and describe what it declares as plain data: functions (name,
return type, parameters), structs (fields), enums (DLPack's) and the DS_*
object-like macros with their evaluated values.

C types are described as small tuples, independent of any target language:
  ("name", "int32_t")            a named type (builtin or typedef)
  ("ptr", inner, is_const)       a pointer to `inner`; is_const = the pointee is const
  ("fnptr",)                     a pointer to a function
  ("struct", "tag")              an anonymous or tagged struct named through a typedef
This module only parses; the generator (generate.py) and the checker
(check_wrappers.py) each map these types to Julia with their own table.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

try:
    from pycparser import c_ast, c_parser
except ImportError:  # reported by the callers with the install hint
    c_ast = c_parser = None

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_INCLUDE = os.path.join(HERE, "fake_include")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
DEFAULT_HEADER = os.path.join(REPO, "include", "deepspeed_c.h")


@dataclass
class Param:
    name: str
    ctype: tuple


@dataclass
class Function:
    name: str
    ret: tuple
    params: list  # of Param (empty for (void))


@dataclass
class Struct:
    name: str               # the typedef name (ds_step_info_t, DLTensor)
    fields: list            # of Param
    source: str             # "deepspeed_c" or "dlpack"


@dataclass
class Enum:
    name: str
    values: list            # of (name, int)


@dataclass
class Macro:
    name: str
    value: int
    unsigned: bool          # the literal carries a u/U suffix (flag bits)


@dataclass
class Header:
    functions: list = field(default_factory=list)
    structs: list = field(default_factory=list)
    enums: list = field(default_factory=list)
    macros: list = field(default_factory=list)
    opaque: list = field(default_factory=list)      # (typedef name, struct tag)
    typedefs: dict = field(default_factory=dict)    # scalar typedefs: name -> ctype


def _dlpack_include_dir() -> str:
    env = os.environ.get("DS_DLPACK_INCLUDE")
    if env:
        return env
    for d in ("/usr/include", "/usr/local/include"):
        if os.path.exists(os.path.join(d, "dlpack", "dlpack.h")):
            return d
    raise SystemExit("c_header: <dlpack/dlpack.h> not found (install libdlpack-dev or set DS_DLPACK_INCLUDE)")


def header_files(header_path: str = DEFAULT_HEADER) -> list:
    """The umbrella header and the sub-headers it includes
    (#include "deepspeed_c/x.h", one per concept), in its order."""
    header_path = os.path.abspath(header_path)
    text = open(header_path, encoding="utf-8").read()
    subs = re.findall(r'^#include "(deepspeed_c/[a-z0-9_]+\.h)"$', text, re.M)
    return [header_path] + [os.path.join(os.path.dirname(header_path), s) for s in subs]


def _cpp(args: list, src: str) -> str:
    # -undef: no compiler-specific macros, so DS_API expands to nothing and the
    # fake <stddef.h>/<stdint.h> (plain typedefs) stand in for the system's.
    cmd = ["cpp", "-undef", "-nostdinc", "-I", FAKE_INCLUDE, "-I", _dlpack_include_dir()] + args + ["-"]
    res = subprocess.run(cmd, input=src, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("c_header: the preprocessor failed:\n" + res.stderr)
    return res.stdout


def _ctype(node) -> tuple:
    if isinstance(node, c_ast.TypeDecl):
        t = node.type
        if isinstance(t, c_ast.IdentifierType):
            return ("name", " ".join(t.names))
        if isinstance(t, c_ast.Struct):
            return ("struct", t.name or "")
        if isinstance(t, c_ast.Enum):
            return ("name", "enum " + (t.name or ""))
        raise ValueError(f"unexpected type node {type(t).__name__}")
    if isinstance(node, c_ast.PtrDecl):
        inner = node.type
        if isinstance(inner, c_ast.FuncDecl):
            return ("fnptr",)
        is_const = isinstance(inner, c_ast.TypeDecl) and "const" in (inner.quals or [])
        if isinstance(inner, c_ast.PtrDecl):
            is_const = "const" in (inner.quals or [])
        return ("ptr", _ctype(inner), is_const)
    raise ValueError(f"unexpected declarator {type(node).__name__}")


def _params(funcdecl) -> list:
    out = []
    if funcdecl.args is None:
        return out
    for i, p in enumerate(funcdecl.args.params):
        t = _ctype(p.type)
        if t == ("name", "void") and p.name is None:
            continue  # f(void)
        out.append(Param(p.name or f"arg{i}", t))
    return out


def _const_eval(node) -> int:
    if isinstance(node, c_ast.Constant):
        text = node.value.rstrip("uUlL")
        return int(text, 0)
    if isinstance(node, c_ast.UnaryOp):
        v = _const_eval(node.expr)
        return {"-": -v, "+": v, "~": ~v}[node.op]
    if isinstance(node, c_ast.BinaryOp):
        a, b = _const_eval(node.left), _const_eval(node.right)
        ops = {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if b >= 0 else 0,
               ">>": a >> b if b >= 0 else 0, "|": a | b, "&": a & b}
        if node.op in ops:
            return ops[node.op]
        if node.op == "/":
            return int(a / b)
    if isinstance(node, c_ast.Cast):
        return _const_eval(node.expr)
    raise ValueError(f"cannot evaluate constant expression node {type(node).__name__}")


def _macros(header_path: str, include_dir: str) -> list:
    """Every object-like DS_* macro defined in the header, with its value."""
    defs = _cpp(["-dM", "-I", include_dir], f'#include "{os.path.basename(header_path)}"\n')
    names, literal = [], {}
    for line in defs.splitlines():
        m = re.match(r"#define (DS_[A-Z0-9_]+) (.*)$", line)
        if not m or m.group(1) == "DS_API" or not m.group(2).strip():
            continue
        names.append(m.group(1))
        literal[m.group(1)] = m.group(2)
    names.sort()
    src = f'#include "{os.path.basename(header_path)}"\n' + "".join(
        f"static const long __dsm_{n} = ({n});\n" for n in names)
    ast = c_parser.CParser().parse(_cpp(["-I", include_dir], src), filename="<macros>")
    values = {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.Decl) and ext.name and ext.name.startswith("__dsm_"):
            values[ext.name[len("__dsm_"):]] = _const_eval(ext.init)

    def is_unsigned(name, seen=()):
        # Typed by use: a literal with a u suffix (flag bits) is unsigned; a
        # macro defined through others is unsigned when they are.
        text = literal[name]
        if re.search(r"\b(0x[0-9a-fA-F]+|[0-9]+)[uU]", text):
            return True
        return any(is_unsigned(ref, seen + (name,)) for ref in re.findall(r"\bDS_[A-Z0-9_]+\b", text)
                   if ref in literal and ref not in seen)
    return [Macro(n, values[n], is_unsigned(n)) for n in names]


def parse(header_path: str = DEFAULT_HEADER) -> Header:
    if c_parser is None:
        raise SystemExit("c_header: pycparser is missing (pip install pycparser; scripts/python_env.sh installs it)")
    header_path = os.path.abspath(header_path)
    include_dir = os.path.dirname(header_path)
    # By path, so that its #include "deepspeed_c/x.h" lines find the
    # sub-headers next to it (the preprocessor follows them in order).
    text = _cpp([], f'#include "{header_path}"\n')
    ast = c_parser.CParser().parse(text, filename=header_path)
    h = Header()
    for ext in ast.ext:
        coord_file = str(ext.coord.file) if ext.coord else ""
        source = "dlpack" if "dlpack" in coord_file else "deepspeed_c"
        if isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.FuncDecl):
            fd = ext.type
            if ext.name.startswith("ds_"):
                h.functions.append(Function(ext.name, _ctype(fd.type), _params(fd)))
        elif isinstance(ext, c_ast.Typedef):
            t = ext.type
            if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Struct):
                st = t.type
                if st.decls is None:
                    h.opaque.append((ext.name, st.name))
                else:
                    fields = [Param(d.name, _ctype(d.type)) for d in st.decls]
                    h.structs.append(Struct(ext.name, fields, source))
            elif isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Enum):
                vals, nxt = [], 0
                for e in t.type.values.enumerators:
                    nxt = _const_eval(e.value) if e.value is not None else nxt
                    vals.append((e.name, nxt))
                    nxt += 1
                h.enums.append(Enum(ext.name, vals))
            elif isinstance(t, c_ast.PtrDecl) and isinstance(t.type, c_ast.FuncDecl):
                h.typedefs[ext.name] = ("fnptr",)
            elif isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
                if source == "deepspeed_c" and ext.name.startswith("ds_"):
                    h.typedefs[ext.name] = _ctype(t)
    h.macros = _macros(header_path, include_dir)
    return h


if __name__ == "__main__":  # a quick listing, for people reading the header through this module
    hdr = parse(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_HEADER)
    for f in hdr.functions:
        print(f.name, f.ret, [(p.name, p.ctype) for p in f.params])
    for s in hdr.structs:
        print("struct", s.name, [(p.name, p.ctype) for p in s.fields])
    for m in hdr.macros:
        print("macro", m.name, m.value, "u" if m.unsigned else "")
    print("opaque", hdr.opaque, "typedefs", hdr.typedefs, "enums", [e.name for e in hdr.enums])
