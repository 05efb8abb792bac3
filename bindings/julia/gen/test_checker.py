#!/usr/bin/env python3
"""A test of check_wrappers.py itself: each broken input below must make the
named check fail (and the untouched header and package must pass), so a
checker that stopped looking would fail here. Temporary copies only; the
repository is not modified. Exit 0 when every case behaves, 1 otherwise,
77 when a needed module is missing."""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import check_wrappers as cw
except SystemExit as exc:  # check_wrappers exits 77 on a missing module
    sys.exit(exc.code)
import c_header  # noqa: E402
import generate  # noqa: E402

HEADER = c_header.DEFAULT_HEADER
JL = cw.DEFAULT_JL


def mutate(text: str, pattern: str, repl: str) -> str:
    new, n = re.subn(pattern, repl, text, count=1, flags=re.S)
    if n != 1:
        raise SystemExit(f"test_checker: the pattern {pattern!r} no longer matches: update the test")
    return new


def main() -> int:
    tmp = tempfile.mkdtemp(prefix="julia_checker_")
    failures = 0
    try:
        # The umbrella header and its sub-headers (include/deepspeed_c/), by path relative to include/.
        header_texts = {os.path.relpath(p, os.path.dirname(HEADER)): open(p, encoding="utf-8").read()
                        for p in c_header.header_files(HEADER)}
        jl_text = open(JL, encoding="utf-8").read()

        def header_with(name, pattern, repl):
            # A copy of the whole header, the one file that matches `pattern` edited.
            hits = [rel for rel, text in header_texts.items() if re.search(pattern, text, flags=re.S)]
            if len(hits) != 1:
                raise SystemExit(f"test_checker: the pattern {pattern!r} matches {len(hits)} header files: "
                                 "update the test")
            for rel, text in header_texts.items():
                path = os.path.join(tmp, name, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "w", encoding="utf-8").write(mutate(text, pattern, repl) if rel == hits[0] else text)
            return os.path.join(tmp, name, "deepspeed_c.h")

        def jl_with(name, text):
            path = os.path.join(tmp, name + ".jl")
            open(path, "w", encoding="utf-8").write(text)
            return path

        cases = [
            # (case, check function, expected to fail?, substring the report must contain)
            ("unchanged header and package: regen", lambda: cw.check_regen(HEADER, JL), False, ""),
            ("unchanged header and package: signatures", lambda: cw.check_signatures(HEADER, JL), False, ""),
            ("unchanged package: syntax", lambda: cw.check_syntax(cw.julia_files()), False, ""),
        ]
        removed = header_with("removed", r"DS_API ds_status_t ds_engine_get_lr\(.*?\);", "")
        cases += [
            ("declaration removed: regen", lambda: cw.check_regen(removed, JL), True, "not what generate.py makes"),
            ("declaration removed: signatures", lambda: cw.check_signatures(removed, JL), True, "ds_engine_get_lr"),
        ]
        changed = header_with("changed", r"ds_engine_set_lr\(ds_engine_t\* engine, double lr\)",
                              "ds_engine_set_lr(ds_engine_t* engine, float lr)")
        cases += [
            ("signature changed: regen", lambda: cw.check_regen(changed, JL), True, "not what generate.py makes"),
            ("signature changed: signatures", lambda: cw.check_signatures(changed, JL), True, "ds_engine_set_lr"),
        ]
        added = header_with("added", r"(DS_API ds_status_t ds_engine_eval\()",
                            r"DS_API ds_status_t ds_engine_new_thing(ds_engine_t* engine, int64_t x);\n\1")
        cases.append(("declaration added: signatures", lambda: cw.check_signatures(added, JL), True,
                      "ds_engine_new_thing"))
        newtype = header_with("newtype", r"(DS_API ds_status_t ds_engine_eval\()",
                              r"typedef struct ds_thing { size_t struct_size; } ds_thing_t;\n"
                              r"DS_API ds_status_t ds_engine_thing(ds_engine_t* engine, ds_thing_t* out);\n\1")
        cases.append(("a new struct type in a new function: signatures",
                      lambda: cw.check_signatures(newtype, JL), True, "ds_thing_t"))
        field = header_with("field", r"float loss_scale;     /\* the loss scale after",
                            "double loss_scale;     /* the loss scale after")
        cases.append(("struct field type changed: signatures", lambda: cw.check_signatures(field, JL), True,
                      "struct ds_step_info_t"))
        const = header_with("const", r"#define DS_ERR_IO\s+12", "#define DS_ERR_IO 16")
        cases.append(("constant value changed: signatures", lambda: cw.check_signatures(const, JL), True,
                      "DS_ERR_IO"))
        # The wrappers edited by hand (the header unchanged): the checker's own table catches it.
        wrong_arg = jl_with("wrong_arg", mutate(
            jl_text, r"(ccall\(\(:ds_engine_rank, libdeepspeed_c\), Int32, \(Ptr\{ds_engine_t\}, )Ptr\{Int32\}",
            r"\1Ptr{Int64}"))
        cases.append(("wrapper argument type edited: signatures", lambda: cw.check_signatures(HEADER, wrong_arg),
                      True, "ds_engine_rank"))
        wrong_ret = jl_with("wrong_ret", mutate(jl_text, r"ccall\(\(:ds_version, libdeepspeed_c\), UInt32",
                                                "ccall((:ds_version, libdeepspeed_c), Int32"))
        cases.append(("wrapper return type edited: signatures", lambda: cw.check_signatures(HEADER, wrong_ret),
                      True, "ds_version"))

        # A generator whose own mapping is wrong produces wrappers the checker refuses.
        saved = dict(generate.SCALARS)
        generate.SCALARS["int64_t"] = "Int32"
        try:
            bad_gen = jl_with("bad_gen", generate.render(c_header.parse(HEADER), "include/deepspeed_c.h"))
        finally:
            generate.SCALARS.clear()
            generate.SCALARS.update(saved)
        cases.append(("generator mapping wrong (int64_t -> Int32): signatures",
                      lambda: cw.check_signatures(HEADER, bad_gen), True, "Int64"))
        broken = jl_with("broken", mutate(jl_text, r"\nend # module LibDeepSpeedC", "\n"))
        cases.append(("a .jl file missing its final end: syntax", lambda: cw.check_syntax([broken]), True,
                      "broken.jl"))
        unbalanced = jl_with("unbalanced", "function f(x)\n    x + (1\nend\n")
        cases.append(("an unbalanced parenthesis: syntax", lambda: cw.check_syntax([unbalanced]), True,
                      "unbalanced.jl"))

        # The hand-written layer against the wrappers: a copy of the package, edited.
        def pkg_with(name, rel, pattern, repl):
            root = os.path.join(tmp, name)
            shutil.copytree(os.path.dirname(os.path.dirname(JL)), root)
            path = os.path.join(root, rel)
            text = mutate(open(path, encoding="utf-8").read(), pattern, repl)
            open(path, "w", encoding="utf-8").write(text)
            return os.path.join(root, "src", "LibDeepSpeedC.jl")

        cases.append(("unchanged package: references", lambda: cw.check_references(JL), False, ""))
        typo = pkg_with("typo", "src/engine.jl", r"L\.ds_engine_get_lr\(", "L.ds_engine_getlr(")
        cases.append(("a misspelt wrapper name: references", lambda: cw.check_references(typo), True,
                      "ds_engine_getlr"))
        arity = pkg_with("arity", "src/training.jl", r"L\.ds_step\(e\.handle, r\)", "L.ds_step(e.handle)")
        cases.append(("a wrapper called with too few arguments: references", lambda: cw.check_references(arity),
                      True, "L.ds_step called with 1 arguments, takes 2"))
        nfields = pkg_with("nfields", "src/engine.jl", r"L\.DLDataType\(0, 0, 0\)", "L.DLDataType(0, 0)")
        cases.append(("a struct built with a field missing: references", lambda: cw.check_references(nfields),
                      True, "L.DLDataType called with 2 arguments, takes 3"))
        misspelt = pkg_with("misspelt", "src/training.jl", r"with_dltensor\(g\) do t", "with_dltensr(g) do t")
        cases.append(("a misspelt call of the package's own function: references",
                      lambda: cw.check_references(misspelt), True, "calls with_dltensr"))
        export = pkg_with("export", "src/DeepSpeedC.jl", r"export LibDeepSpeedC,", "export LibDeepSpeedC, no_such_fn,")
        cases.append(("an export of an undefined name: references", lambda: cw.check_references(export), True,
                      "no_such_fn"))
        test_ref = pkg_with("test_ref", "test/runtests.jl", r"DeepSpeedC\.global_steps\(e\) == 100",
                            "DeepSpeedC.global_step(e) == 100")
        cases.append(("runtests.jl calling an undefined function: references",
                      lambda: cw.check_references(test_ref), True, "DeepSpeedC.global_step"))

        cases.append(("unchanged header and package: layout", lambda: cw.check_layout(HEADER, JL), False, ""))
        wider = header_with("wider", r"int32_t reserved0;    /\* written 0 \(explicit padding\) \*/",
                            "int64_t reserved0;    /* written 0 (explicit padding) */")
        cases.append(("a C field widened (offsets move): layout", lambda: cw.check_layout(wider, JL), True,
                      "struct ds_step_info_t"))
        jl_double = jl_with("jl_double", mutate(jl_text, r"loss_scale::Cfloat", "loss_scale::Cdouble"))
        cases.append(("a Julia field widened: layout", lambda: cw.check_layout(HEADER, jl_double), True,
                      "offsetof"))

        md = os.path.join(tmp, "README.md")
        open(md, "w", encoding="utf-8").write("# x\n\n```julia\ne = Engine(cfg\n```\n")
        cases.append(("a README example with an unclosed call: syntax", lambda: cw.check_syntax([md]), True,
                      "README.md:4"))

        for name, fn, should_fail, needle in cases:
            problems = fn()
            if should_fail:
                ok = bool(problems) and any(needle in p for p in problems)
                detail = problems[0] if problems else "no problem reported"
            else:
                ok = not problems
                detail = problems[0] if problems else "passes"
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
            failures += not ok
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"checker self-test: {failures} case(s) misbehaved" if failures else "checker self-test: all cases behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
