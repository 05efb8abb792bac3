#!/usr/bin/env python3
"""Static checks of the Julia package (no Julia runtime exists on the project's
machines, so this is what the test suite can establish):

  regen      re-running generate.py on the header gives the committed LibDeepSpeedC.jl
  signatures every DS_API function of the header is ccall'ed exactly once in
             LibDeepSpeedC.jl, by a wrapper of the same arity, with the return and
             argument types that this checker's OWN table maps the C types to (not
             the generator's); every public struct (and DLPack's DLDevice,
             DLDataType, DLTensor) has the same fields with the mapped types, in
             order; every DS_* constant has the header's value
  syntax     every .jl file under bindings/julia, and every ```julia block of its
             Markdown files, parses with tree-sitter-julia without ERROR or MISSING nodes
  project    Project.toml's version is the header's DS_VERSION_*
  references the hand-written files use only names LibDeepSpeedC.jl defines, call
             each raw wrapper with its arity and each struct with its field count,
             call only functions the package, the file or Julia's Base defines,
             and export only what the package defines
  layout     every struct's size and field offsets, computed from the Julia fields,
             equal sizeof/offsetof from a C program compiled against the header

The Julia side is read with tree-sitter, not with regular expressions.
  check_wrappers.py [--header H] [--jl F] [--only regen,signatures,syntax,project,references,layout]
Exit 0: all pass; 1: a check failed (each problem printed); 77: a Python
module it needs is missing (reported as a skip; a failure when CI=true).
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import tree_sitter
    import tree_sitter_julia
    import pycparser  # noqa: F401  (c_header needs it)
except ImportError as exc:  # pragma: no cover
    # In CI the test command installed these (scripts/python_env.sh): a missing
    # one there is a broken install step, not a reason to skip.
    if os.environ.get("CI") == "true":
        print(f"FAIL: {exc.name} is missing under CI=true (scripts/python_env.sh should have installed it)")
        sys.exit(1)
    print(f"SKIP: {exc.name} is missing (scripts/python_env.sh installs pycparser, tree-sitter, tree-sitter-julia)")
    sys.exit(77)

import c_header  # noqa: E402
import generate  # noqa: E402

JULIA_ROOT = os.path.join(c_header.REPO, "bindings", "julia")
DEFAULT_JL = generate.DEFAULT_OUT
PROJECT_TOML = os.path.join(JULIA_ROOT, "DeepSpeedC", "Project.toml")

# ---- the checker's own C -> Julia table ---------------------------------------
# Spelled out per C type name; pointers add Ptr{...}. Kept apart from
# generate.py on purpose: a wrong entry there is caught here.
C_TO_JULIA = {
    "void": "Cvoid", "char": "Cchar", "int": "Cint", "float": "Cfloat", "double": "Cdouble",
    "size_t": "Csize_t", "uint8_t": "UInt8", "uint16_t": "UInt16", "int32_t": "Int32",
    "uint32_t": "UInt32", "int64_t": "Int64", "uint64_t": "UInt64",
    "ds_status_t": "Int32",        # typedef int32_t ds_status_t
    "ds_log_fn": "Ptr{Cvoid}",     # a C function pointer
    "DLDeviceType": "Int32",       # a C enum, 4 bytes
}
# Types that keep their C name in Julia: the structs and the opaque handles.
PASS_THROUGH = {"ds_engine_t", "ds_comm_t", "ds_model_t", "ds_engine_options_t", "ds_step_info_t",
                "ds_param_info_t", "ds_comm_options_t", "ds_memory_report_t", "DLTensor", "DLDevice",
                "DLDataType", "ds_topology_t", "ds_pipe_schedule_t", "ds_pipe_instr_t", "ds_pipe_info_t"}
CHECKED_DLPACK_STRUCTS = ("DLDevice", "DLDataType", "DLTensor")


def expected_julia(t: tuple) -> str:
    if t[0] == "fnptr":
        return "Ptr{Cvoid}"
    if t[0] == "ptr":
        return "Ptr{%s}" % expected_julia(t[1])
    name = t[1]
    if name in C_TO_JULIA:
        return C_TO_JULIA[name]
    if name in PASS_THROUGH:
        return name
    raise KeyError(f"the checker has no Julia type for C type {name!r}: add it to C_TO_JULIA")


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", text)


# ---- tree-sitter --------------------------------------------------------------
_PARSER = None


def parser():
    global _PARSER
    if _PARSER is None:
        lang = tree_sitter.Language(tree_sitter_julia.language())
        _PARSER = tree_sitter.Parser(lang)
    return _PARSER


def parse_jl(path: str):
    with open(path, "rb") as fh:
        return parser().parse(fh.read())


def walk(node):
    yield node
    for child in node.children:
        yield from walk(child)


def _julia_sources(path: str) -> list:
    """(first line, bytes) of the Julia code in a file: a whole .jl file, or each
    ```julia block of a Markdown file (the README's example must parse too)."""
    data = open(path, "rb").read()
    if not path.endswith(".md"):
        return [(0, data)]
    blocks, lines, start = [], data.split(b"\n"), None
    for i, line in enumerate(lines):
        if start is None and line.strip() == b"```julia":
            start = i + 1
        elif start is not None and line.strip() == b"```":
            blocks.append((start, b"\n".join(lines[start:i]) + b"\n"))
            start = None
    return blocks


def check_syntax(files: list) -> list:
    problems = []
    for path in files:
        for first_line, src in _julia_sources(path):
            tree = parser().parse(src)
            for n in walk(tree.root_node):
                if n.type == "ERROR" or n.is_missing:
                    line, col = n.start_point
                    what = f"missing {n.type}" if n.is_missing else "syntax error"
                    snippet = n.text.decode(errors="replace")[:40].replace("\n", "\\n")
                    problems.append(f"{os.path.relpath(path, c_header.REPO)}:{first_line + line + 1}:{col + 1}: "
                                    f"{what} near {snippet!r}")
                    break  # one report per source: later nodes usually follow from the first
    return problems


def _ccalls(tree) -> dict:
    """name -> (julia function params, return type text, [arg type texts], passed args)."""
    found = {}
    for fn in walk(tree.root_node):
        if fn.type != "function_definition":
            continue
        sig = next((c for c in fn.named_children if c.type == "signature"), None)
        if sig is None or not sig.named_children or sig.named_children[0].type != "call_expression":
            continue
        call = sig.named_children[0]
        fparams = [a.text.decode() for a in call.named_children[1].named_children]
        for node in walk(fn):
            if node.type != "call_expression" or node.named_children[0].text != b"ccall":
                continue
            args = node.named_children[1].named_children
            target, ret, types = args[0], args[1], args[2]
            if target.type != "tuple_expression" or target.named_children[0].type != "quote_expression":
                continue
            cname = target.named_children[0].named_children[0].text.decode()
            tnodes = [t for t in types.named_children] if types.type == "tuple_expression" else None
            found.setdefault(cname, []).append(
                (fparams, _norm(ret.text.decode()), None if tnodes is None else [_norm(t.text.decode()) for t in tnodes],
                 [a.text.decode() for a in args[3:]], target.named_children[1].text.decode()))
    return found


def _structs(tree) -> dict:
    out = {}
    for n in walk(tree.root_node):
        if n.type != "struct_definition":
            continue
        head = next(c for c in n.named_children if c.type == "type_head")
        fields = []
        for c in n.named_children:
            if c.type == "typed_expression":
                fields.append((c.named_children[0].text.decode(), _norm(c.named_children[1].text.decode())))
        out[head.text.decode()] = fields
    return out


def _constants(tree) -> dict:
    out = {}
    for n in walk(tree.root_node):
        if n.type == "const_statement":
            a = n.named_children[0]
            if a.type == "assignment":
                out[a.named_children[0].text.decode()] = _norm(a.named_children[-1].text.decode())
    return out


def check_signatures(header: str, jl: str) -> list:
    try:
        return _check_signatures(header, jl)
    except KeyError as exc:  # a C type the checker's table does not know: a new type in the header
        return [str(exc.args[0])]


def _check_signatures(header: str, jl: str) -> list:
    hdr = c_header.parse(header)
    tree = parse_jl(jl)
    problems = []
    calls = _ccalls(tree)
    names = [f.name for f in hdr.functions]
    for f in hdr.functions:
        where = f"{f.name}"
        if f.name not in calls:
            problems.append(f"{where}: declared in the header, no ccall wrapper in {os.path.basename(jl)}")
            continue
        if len(calls[f.name]) != 1:
            problems.append(f"{where}: {len(calls[f.name])} ccalls, expected one")
            continue
        fparams, ret, types, passed, lib = calls[f.name][0]
        want_ret = expected_julia(f.ret)
        want_types = [expected_julia(p.ctype) for p in f.params]
        if lib != "libdeepspeed_c":
            problems.append(f"{where}: ccall library is {lib}, expected libdeepspeed_c")
        if ret != want_ret:
            problems.append(f"{where}: return type {ret}, the header's {generate.c_text(f.ret)} maps to {want_ret}")
        if types is None:
            problems.append(f"{where}: argument types are not a literal tuple")
        elif types != want_types:
            problems.append(f"{where}: argument types ({', '.join(types)}), the header's "
                            f"({', '.join(generate.c_text(p.ctype) for p in f.params)}) map to "
                            f"({', '.join(want_types)})")
        if len(fparams) != len(f.params) or len(passed) != len(f.params):
            problems.append(f"{where}: the wrapper takes {len(fparams)} and passes {len(passed)} arguments, "
                            f"the header declares {len(f.params)}")
        elif passed != fparams:
            problems.append(f"{where}: passes ({', '.join(passed)}) but takes ({', '.join(fparams)})")
    for extra in sorted(set(calls) - set(names)):
        problems.append(f"{extra}: ccall'ed in {os.path.basename(jl)} but not declared in the header")

    structs = _structs(tree)
    for s in hdr.structs:
        if s.source == "dlpack" and s.name not in CHECKED_DLPACK_STRUCTS:
            continue
        if s.name not in structs:
            problems.append(f"struct {s.name}: in the header, missing from {os.path.basename(jl)}")
            continue
        # A field named like a Julia keyword gets a trailing underscore (ds_pipe_instr_t.type -> type_).
        want = [(p.name + "_" if p.name in JULIA_FIELD_KEYWORDS else p.name, expected_julia(p.ctype))
                for p in s.fields]
        if structs[s.name] != want:
            problems.append(f"struct {s.name}: fields {structs[s.name]}, the header's map to {want}")

    consts = _constants(tree)
    for m in hdr.macros:
        got = consts.get(m.name)
        if got is None:
            problems.append(f"constant {m.name}: in the header, missing from {os.path.basename(jl)}")
            continue
        value = re.sub(r"^(Int32|UInt32|Int64|Int)\((.*)\)$", r"\2", got)
        try:
            ok = int(value, 0) == m.value
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"constant {m.name}: {got} in Julia, {m.value} in the header")
        if m.unsigned and not got.startswith("UInt32("):
            problems.append(f"constant {m.name}: flag bits (u suffix) should be UInt32, got {got}")
    return problems


def _callee_name(node):
    """The name a function definition or short-form `f(x) = ...` defines (None for Base.f)."""
    if node.type == "where_expression":
        node = node.named_children[0]
    if node.type == "typed_expression":  # f(x)::T = ...
        node = node.named_children[0]
    if node.type == "call_expression" and node.named_children[0].type == "identifier":
        return node.named_children[0].text.decode()
    return None


def _definitions(tree) -> set:
    """Names a file defines: functions (both forms), structs, primitive types, constants
    and other assignments, modules, and the names an `@eval` loop defines (`:name`)."""
    names = set()
    for n in walk(tree.root_node):
        if n.type == "function_definition":
            sig = next((c for c in n.named_children if c.type == "signature"), None)
            if sig is not None and sig.named_children:
                name = _callee_name(sig.named_children[0])
                if name:
                    names.add(name)
        elif n.type == "assignment":
            lhs = n.named_children[0]
            name = lhs.text.decode() if lhs.type == "identifier" else _callee_name(lhs)
            if name:
                names.add(name)
        elif n.type in ("struct_definition", "primitive_definition", "abstract_definition", "module_definition"):
            head = n.named_children[0]
            ident = next((x for x in walk(head) if x.type == "identifier"), None)
            if ident is not None:
                names.add(ident.text.decode())
        elif n.type == "for_binding":
            for q in walk(n):
                if q.type == "quote_expression" and q.named_children and q.named_children[0].type == "identifier":
                    names.add(q.named_children[0].text.decode())
    return names


# The Julia Base/Core/Test names the package calls (all exist since Julia 1.6). A call
# of any other name must be defined by the package or the file itself, so a misspelt
# function name, which only a run would otherwise reveal, fails here. Add a name
# when the code starts using another Base function.
# Julia keywords (and the old `type`) a C field name may collide with.
JULIA_FIELD_KEYWORDS = {"begin", "end", "function", "global", "local", "module", "type", "struct", "quote",
                        "do", "for", "if", "while", "let", "try", "catch", "return", "const", "macro"}

JULIA_BASE_CALLS = {
    "@__DIR__", "@cfunction", "@eval", "@inline", "@preserve", "@test", "@test_throws", "@testset",
    "ArgumentError", "Array", "Cdouble", "Cfloat", "Cint", "Csize_t", "Symbol", "div", "eachline", "iterate", "parse", "split", "broadcast!",
    "values", "Dict", "DimensionMismatch", "Float16", "Float32",
    "Float64", "IndexCartesian", "Int", "Int32", "Int64", "PermutedDimsArray", "Ptr", "Ref", "String",
    "Tuple", "UInt16", "UInt32", "UInt64", "UInt8", "VersionNumber", "abspath", "all", "any", "close",
    "collect", "copy", "copyto!", "cos", "eachindex", "eltype", "error", "fill", "finalizer", "get", "haskey",
    "include", "isapprox", "isempty", "isfile", "isopen", "joinpath", "keys", "length", "mktempdir",
    "ndims", "new", "occursin", "ones", "only", "permutedims", "pointer", "pointer_from_objref", "print",
    "push!", "reinterpret", "repr", "reshape", "reverse", "rm", "sin", "size", "sizeof", "sort!",
    "sprint", "sqrt", "sum", "throw", "typeof", "unsafe_load", "unsafe_pointer_to_objref",
    "unsafe_string", "unsafe_wrap", "zeros",
}


def _parameters(tree) -> set:
    """Names of function parameters (a parameter may be called: `f(ref)`)."""
    names = set()
    for n in walk(tree.root_node):
        if n.type in ("signature", "do_clause"):
            for x in walk(n):
                if x.type == "argument_list" or x.type == "do_clause":
                    for a in x.named_children:
                        if a.type == "identifier":
                            names.add(a.text.decode())
                        elif a.type == "typed_expression" and a.named_children[0].type == "identifier":
                            names.add(a.named_children[0].text.decode())
    return names


def _arg_count(call) -> int:
    args = call.named_children[1]
    return len([a for a in args.named_children if a.type not in ("line_comment", "block_comment")])


def check_references(jl: str = DEFAULT_JL) -> list:
    """The hand-written files against the generated wrappers, read with tree-sitter:
    every `L.x` / `LibDeepSpeedC.x` names something LibDeepSpeedC.jl defines, called
    with as many arguments as the wrapper takes (or the struct has fields); every
    `DeepSpeedC.x` and every exported name is defined by the package."""
    pkg = os.path.dirname(os.path.dirname(jl))
    lib_tree = parse_jl(jl)
    arity = {name: len(v[0][0]) for name, v in _ccalls(lib_tree).items()}
    fields = {name: len(f) for name, f in _structs(lib_tree).items()}
    lib_names = _definitions(lib_tree)
    hand = sorted(p for p in glob.glob(os.path.join(pkg, "**", "*.jl"), recursive=True)
                  if os.path.abspath(p) != os.path.abspath(jl))
    trees = {p: parse_jl(p) for p in hand}
    src_names = set(lib_names) | {"LibDeepSpeedC"}
    for p, t in trees.items():
        if os.sep + "src" + os.sep in p:
            src_names |= _definitions(t)
    local = {p: src_names | _definitions(t) | _parameters(t) | JULIA_BASE_CALLS for p, t in trees.items()}
    problems = []
    for p, t in trees.items():
        rel = os.path.relpath(p, c_header.REPO)
        for n in walk(t.root_node):
            if n.type == "field_expression" and len(n.named_children) == 2:
                obj, attr = n.named_children
                if obj.type != "identifier" or attr.type != "identifier":
                    continue
                where = f"{rel}:{n.start_point[0] + 1}"
                name = attr.text.decode()
                if obj.text in (b"L", b"LibDeepSpeedC"):
                    if name not in lib_names:
                        problems.append(f"{where}: {n.text.decode()}: LibDeepSpeedC defines no {name}")
                        continue
                    parent = n.parent
                    if parent is not None and parent.type == "call_expression" and parent.named_children[0] == n:
                        want = arity.get(name, fields.get(name))
                        got = _arg_count(parent)
                        if want is not None and got != want:
                            problems.append(f"{where}: {n.text.decode()} called with {got} arguments, takes {want}")
                elif obj.text == b"DeepSpeedC" and name not in src_names:
                    problems.append(f"{where}: {n.text.decode()}: the package defines no {name}")
            elif n.type in ("call_expression", "macro_identifier"):
                if n.type == "macro_identifier":
                    callee = n
                elif n.named_children[0].type == "identifier":
                    callee = n.named_children[0]
                else:
                    continue
                name = callee.text.decode()
                if name not in local.get(p, set()):
                    problems.append(f"{rel}:{n.start_point[0] + 1}: calls {name}, which neither the package, "
                                    "this file nor the checker's list of Julia Base names (JULIA_BASE_CALLS) has")
            elif n.type == "export_statement":
                for x in n.named_children:
                    if x.type == "identifier" and x.text.decode() not in src_names:
                        problems.append(f"{rel}:{x.start_point[0] + 1}: exports {x.text.decode()}, "
                                        "which the package does not define")
    return problems


# Size and alignment of the Julia field types on the 64-bit targets the library supports.
JULIA_SCALAR_LAYOUT = {
    "Int8": 1, "UInt8": 1, "Int16": 2, "UInt16": 2, "Int32": 4, "UInt32": 4, "Cint": 4,
    "Cfloat": 4, "Int64": 8, "UInt64": 8, "Csize_t": 8, "Cdouble": 8,
}


def _julia_layout(structs: dict, name: str) -> tuple:
    """(size, alignment, [(field, offset)]) of an isbits Julia struct, by C's rules
    (which Julia follows for isbits types): each field at its alignment, the size
    rounded up to the largest alignment."""
    offset, align, offsets = 0, 1, []
    for fname, ftype in structs[name]:
        if ftype.startswith("Ptr{"):
            size = a = 8
        elif ftype in JULIA_SCALAR_LAYOUT:
            size = a = JULIA_SCALAR_LAYOUT[ftype]
        elif ftype in structs:
            size, a, _ = _julia_layout(structs, ftype)
        else:
            raise KeyError(f"no layout for Julia type {ftype} (field {name}.{fname})")
        offset = (offset + a - 1) // a * a
        offsets.append((fname, offset))
        offset += size
        align = max(align, a)
    return (offset + align - 1) // align * align, align, offsets


def check_layout(header: str, jl: str) -> list:
    """Every struct of LibDeepSpeedC.jl has the C compiler's sizeof and offsetof (a small
    C program compiled against the header prints them)."""
    import json
    import shutil
    import subprocess
    import tempfile
    hdr = c_header.parse(header)
    wanted = [s for s in hdr.structs if s.source == "deepspeed_c" or s.name in CHECKED_DLPACK_STRUCTS]
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return ["no C compiler (cc) to measure the header's layout"]
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "deepspeed_c.h"', "int main(void) {",
             '  printf("{");']
    for i, s in enumerate(wanted):
        sep = "," if i else ""
        lines.append(f'  printf("{sep}\\"{s.name}\\": [%zu", sizeof({s.name}));')
        for f in s.fields:
            lines.append(f'  printf(", %zu", offsetof({s.name}, {f.name}));')
        lines.append('  printf("]");')
    lines += ['  printf("}\\n");', "  return 0;", "}"]
    tmp = tempfile.mkdtemp(prefix="julia_layout_")
    try:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        open(src, "w").write("\n".join(lines) + "\n")
        res = subprocess.run([cc, "-std=c99", "-I", os.path.dirname(os.path.abspath(header)), src, "-o", exe],
                             capture_output=True, text=True)
        if res.returncode != 0:
            return ["the layout program did not compile:\n" + res.stderr]
        c_layout = json.loads(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    structs = _structs(parse_jl(jl))
    problems = []
    for s in wanted:
        if s.name not in structs:
            problems.append(f"struct {s.name}: missing from {os.path.basename(jl)}")
            continue
        try:
            size, _, offsets = _julia_layout(structs, s.name)
        except KeyError as exc:
            problems.append(str(exc))
            continue
        c_size, c_offsets = c_layout[s.name][0], c_layout[s.name][1:]
        if size != c_size:
            problems.append(f"struct {s.name}: {size} bytes in Julia, sizeof = {c_size} in C")
        got = [o for _, o in offsets]
        if got != c_offsets:
            problems.append(f"struct {s.name}: field offsets {got} in Julia, offsetof {c_offsets} in C")
    return problems


def check_regen(header: str, jl: str) -> list:
    text = generate.render(c_header.parse(header), "include/deepspeed_c.h")
    try:
        old = open(jl, encoding="utf-8").read()
    except FileNotFoundError:
        return [f"{jl}: missing"]
    if old == text:
        return []
    old_lines, new_lines = old.splitlines(), text.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b), min(len(old_lines), len(new_lines)))
    return [f"{os.path.relpath(jl, c_header.REPO)} is not what generate.py makes of {header} "
            f"(first difference at line {first + 1}): run python3 bindings/julia/gen/generate.py"]


def check_project(header: str, toml: str = PROJECT_TOML) -> list:
    vals = {m.name: m.value for m in c_header.parse(header).macros}
    want = f"{vals['DS_VERSION_MAJOR']}.{vals['DS_VERSION_MINOR']}.{vals['DS_VERSION_PATCH']}"
    m = re.search(r'^version\s*=\s*"([^"]+)"', open(toml, encoding="utf-8").read(), re.M)
    if not m:
        return [f"{toml}: no version"]
    return [] if m.group(1) == want else [f"{toml}: version {m.group(1)}, the header says {want}"]


def julia_files() -> list:
    """Every .jl file under bindings/julia, and its Markdown files (their ```julia blocks)."""
    return sorted(glob.glob(os.path.join(JULIA_ROOT, "**", "*.jl"), recursive=True)
                  + glob.glob(os.path.join(JULIA_ROOT, "**", "*.md"), recursive=True))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--header", default=c_header.DEFAULT_HEADER)
    ap.add_argument("--jl", default=DEFAULT_JL)
    ap.add_argument("--only", default="regen,signatures,syntax,project,references,layout")
    a = ap.parse_args(argv)
    checks = a.only.split(",")
    failed = 0
    for name in checks:
        if name == "regen":
            problems = check_regen(a.header, a.jl)
        elif name == "signatures":
            problems = check_signatures(a.header, a.jl)
        elif name == "syntax":
            files = julia_files()
            problems = check_syntax(files)
            name = f"syntax ({len(files)} .jl and .md files)"
        elif name == "project":
            problems = check_project(a.header)
        elif name == "references":
            problems = check_references(a.jl)
        elif name == "layout":
            problems = check_layout(a.header, a.jl)
        else:
            ap.error(f"unknown check {name!r}")
        for p in problems:
            print(f"FAIL {name}: {p}")
        print(f"{'FAIL' if problems else 'ok  '} {name}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
