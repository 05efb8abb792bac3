#!/usr/bin/env python3
"""Every function the C header declares is called by the C++ wrapper.

deepspeed_c.hpp compiles against deepspeed_c.h, so a changed signature breaks
its build; this check catches the other drift: a function added to the C
header that the wrapper does not offer. Usage:
  check_wrapper_coverage.py HEADER.h WRAPPER.hpp [MORE.hpp ...]
  check_wrapper_coverage.py --self-test HEADER.h WRAPPER.hpp [MORE.hpp ...]   (an unwrapped function is reported)
"""
import os
import re
import sys
import tempfile

# C functions the wrapper reaches through another call, with the reason.
COVERED_ELSEWHERE = {
    "ds_engine_accumulate_grad": "Engine::accumulate_grad calls ds_engine_accumulate_grad_ex (flags 0 = the same call)",
    "ds_save_16bit_model": "Engine::save_16bit_model calls ds_save_16bit_model_ex (flags 0 = the same call)",
}


def read_header(path):
    """The umbrella header's text followed by the sub-headers it includes
    (#include "deepspeed_c/x.h", one per concept), in its order."""
    text = open(path).read()
    subs = re.findall(r'^#include "(deepspeed_c/[a-z0-9_]+\.h)"$', text, re.M)
    return text + "".join(open(os.path.join(os.path.dirname(path), s)).read() for s in subs)


def declared(header_text):
    return sorted(set(re.findall(r"DS_API[^;(]*?[ *](ds_[a-z0-9_]+)\s*\(", header_text)))


def missing(header_text, wrapper_text):
    return [f for f in declared(header_text)
            if f not in COVERED_ELSEWHERE and not re.search(r"\b" + f + r"\s*[(,)]", wrapper_text)]


def main(argv):
    self_test = argv[1:2] == ["--self-test"]
    if self_test:
        argv = argv[:1] + argv[2:]
    header = read_header(argv[1])
    wrapper = "\n".join(open(p).read() for p in argv[2:])
    names = declared(header)
    if len(names) < 50:
        print(f"only {len(names)} declarations found in {argv[1]}: the parser is broken")
        return 1
    if self_test:
        # A function added to the header and not wrapped must be reported.
        extra = header.replace("#ifdef __cplusplus\n} /* extern \"C\" */",
                               "DS_API ds_status_t ds_engine_new_feature(ds_engine_t* engine);\n"
                               "#ifdef __cplusplus\n} /* extern \"C\" */")
        with tempfile.NamedTemporaryFile("w", suffix=".h") as f:
            f.write(extra)
            f.flush()
            got = missing(open(f.name).read(), wrapper)
        if got != ["ds_engine_new_feature"]:
            print(f"self-test: expected the checker to report ds_engine_new_feature, got {got}")
            return 1
        print("self-test: an unwrapped declaration is reported")
        return 0
    gone = missing(header, wrapper)
    if gone:
        print(f"{' + '.join(argv[2:])} does not wrap: " + ", ".join(gone))
        return 1
    print(f"all {len(names)} functions of {argv[1]} are wrapped "
          f"({len(COVERED_ELSEWHERE)} through another call)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
